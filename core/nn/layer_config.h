// Configuration of one μMoE layer or two-layer block, and its parameter count (spec §1, §3).
//
// This header is plain C++ (no LibTorch) so that UI code can hold and show configurations
// without pulling in torch headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::nn {

/// How the expert weight tensor W ∈ R^{N_1×…×N_E×(I+1)×O} is factorised.
enum class Factorization { CP, TR };

/// Normalisation of the gate scores Gᵀz before the activation.
enum class GateNorm { BatchNorm, LayerNorm, None };

/// Activation that turns normalised gate scores into expert coefficients.
enum class GateActivationKind { Entmax15, Softmax };

struct LayerConfig {
  Factorization factorization = Factorization::CP;
  int64_t input_dim = 0;   ///< I
  int64_t output_dim = 0;  ///< O (the hidden width when second_dim > 0)
  /// N_e for every expert mode; its size is the hierarchy depth E (1–4 for CP, 1–4 for TR).
  std::vector<int64_t> expert_dims;
  int64_t cp_rank = 0;  ///< R, for CP
  /// TR ring ranks R_1 … R_{E+2}. Core k has shape [R_k, dim_k, R_{k+1}] (indices mod E+2), so
  /// for E = 1: F0 [R1,N,R2], F1 [R2,I+1,R3], F2 [R3,O,R1]. R_1 = 1 is a tensor train.
  std::vector<int64_t> tr_ranks;
  bool use_bias = true;  ///< fold a per-expert bias in as an extra input row (spec §1)
  GateNorm gate_norm = GateNorm::BatchNorm;
  GateActivationKind gate_activation = GateActivationKind::Entmax15;
  bool input_layer_norm = false;  ///< LayerNorm (with affine) on z after the gates are computed
  /// > 0: two-layer block y = μMoE₂(GELU(μMoE₁(z))) with μMoE₂: O → second_dim, same coefficients.
  int64_t second_dim = 0;
  double norm_eps = 1e-5;

  int64_t hierarchy() const { return static_cast<int64_t>(expert_dims.size()); }
  bool is_block() const { return second_dim > 0; }
  /// Π N_e.
  int64_t total_experts() const;
  /// Width of the block's final output (second_dim for a block, else output_dim).
  int64_t final_output_dim() const { return is_block() ? second_dim : output_dim; }

  /// Shapes of the stored factors of the first (layer = 0) or second (layer = 1) μMoE layer,
  /// in the reference implementation's order and layout (spec §2).
  std::vector<std::vector<int64_t>> factor_shapes(int layer = 0) const;

  /// Throws mumoe::UsageError naming the first inconsistent field.
  void validate() const;

  /// "CP", "TR" or "TT" (TR with R_1 = 1).
  std::string variant_name() const;
};

/// Parameter counts of a layer or block; gating is included in the total (spec §3).
struct ParameterCount {
  int64_t factors = 0;     ///< all factor matrices / cores of both layers
  int64_t gating = 0;      ///< Σ_e I·N_e
  int64_t input_norm = 0;  ///< 2·I with input LayerNorm, else 0
  int64_t total() const { return factors + gating + input_norm; }
};

ParameterCount count_parameters(const LayerConfig& config);

/// ASCII lower case: option values (factorisations, gates, presets) match case-insensitively.
std::string lowercase(std::string text);

std::string to_string(Factorization f);
std::string to_string(GateNorm n);
std::string to_string(GateActivationKind a);
/// Parse the names produced by to_string (case-insensitive; "bn"/"ln"/"none" also accepted).
/// Throw mumoe::UsageError for anything else.
Factorization parse_factorization(const std::string& text);
GateNorm parse_gate_norm(const std::string& text);
GateActivationKind parse_gate_activation(const std::string& text);

}  // namespace mumoe::nn
