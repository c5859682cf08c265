// A set of experts whose coefficients are forced to zero (counterfactual ablation, spec §4).
#pragma once

#include <cstdint>
#include <vector>

namespace mumoe::nn {

/// Experts to remove, per expert mode. a_e[n] := 0 for every listed n, without renormalising:
/// exactly W_n := 0, including expert n's bias. Applies to both layers of a two-layer block.
struct ExpertAblation {
  std::vector<std::vector<int64_t>> experts_per_mode;

  /// Ablation of the given experts of the first (or only) expert mode.
  static ExpertAblation first_mode(std::vector<int64_t> experts) {
    return ExpertAblation{{std::move(experts)}};
  }
  bool empty() const {
    for (const auto& m : experts_per_mode)
      if (!m.empty()) return false;
    return true;
  }
};

}  // namespace mumoe::nn
