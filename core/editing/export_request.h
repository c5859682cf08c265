// What an export of an edited model is asked and what it reports — the plain-C++ half of
// editing/model_export.h, for front ends that do not compute with tensors (the GUI): the layouts,
// the request, the report, the experts to remove, and the export without experts by paths.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mumoe::editing {

/// Auto: Source for a model opened from a user's state dict (no manifest), else Mumoe.
/// Source: every tensor of the source file under its own name, the edited layer's replaced;
/// safetensors carry the manifest in their metadata, a .pth/.pt output gets it in
/// model::manifest_sidecar_path (torch.load ignores both).
enum class ExportLayout { Auto, Mumoe, Reference, Source };
ExportLayout parse_export_layout(const std::string& text);  ///< "auto" | "mumoe" | "reference" | "source"
std::string to_string(ExportLayout layout);

struct ExportRequest {
  std::string output;
  ExportLayout layout = ExportLayout::Auto;
  /// Replace an existing destination (required when it is the source model itself).
  bool overwrite = false;
  int64_t verify_samples = 256;  ///< the first samples of the verification data
  double tolerance = 1e-5;       ///< float32 max abs difference allowed
};

/// Experts removed from one μMoE layer for good: W_n := 0 for each listed n of its first expert
/// mode (nn/expert_slices.h: CP row n of both layers' expert factors, TR slice n; a router MLP's
/// expert output layer) — exactly the ablation a_n := 0 of the Ablation page and `mumoe ablate`, so
/// the exported model predicts what they showed. The layer's shapes stay, so a user's
/// `load_state_dict(strict=True)` takes the file.
struct ExpertRemoval {
  std::string layer;             ///< as `mumoe info` names it; "" = the model's only μMoE layer
  std::vector<int64_t> experts;  ///< any order; repeats count once (the report lists them ascending)
};

/// "LAYER:3,7" or "3,7" (the model's only layer). Throws UsageError naming `text` when malformed.
ExpertRemoval parse_expert_removal(const std::string& text);
nlohmann::json to_json(const ExpertRemoval& removal);

struct ExportReport {
  std::string output;
  ExportLayout layout = ExportLayout::Mumoe;  ///< as written (never Auto)
  int64_t edits = 0;
  std::vector<ExpertRemoval> removed;  ///< export_without_experts: the layers resolved by name
  nlohmann::json layer_before;  ///< the edited layer's configuration before …
  nlohmann::json layer_after;   ///< … and after folding (ranks grown)
  double max_abs_difference = 0;
  int64_t verified_samples = 0;
  double seconds = 0;
};

nlohmann::json to_json(const ExportReport& report);

/// export_without_experts (model_export.h) on the model file at `model_path` (opened as every
/// command opens it, remembered opening choices included) verified on the data `data_spec`.
ExportReport export_model_without_experts(const std::string& model_path, const std::vector<ExpertRemoval>& removals,
                                          const std::string& data_spec, const ExportRequest& request);

}  // namespace mumoe::editing
