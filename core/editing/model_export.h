// Export of an edited model: every logit edit folded exactly into the weights (edit_fold.h), or
// experts removed for good (their factor slices zeroed: W_n := 0, what ablation computes), written
// as the project's model file, as a plain state_dict in the reference key layout
// (spec §2), or in the source file's own layout — the same keys and prefixes, a .pth when it was
// a PyTorch checkpoint — so the user's `model.load_state_dict(torch.load(path), strict=True)`
// gives the edited model; verified before it is published.
//
// The file is written beside the destination, reloaded through the ordinary loader and its
// plain forward pass compared with the live-edited model on a sample batch; only when the
// maximum absolute difference is within tolerance is it renamed onto the destination. A failed
// write or verification leaves the destination (and the source model) as it was.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "editing/logit_edit.h"
#include "io/safetensors.h"
#include "model/model_file.h"

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
  std::vector<int64_t> experts;  ///< ascending, distinct
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

/// Folds `edits` into the model of `source` and writes it as requested. `verify_data` must fit
/// the model (its test split, say). Throws UsageError (bad request, existing destination),
/// WriteError (I/O, e.g. a full disk) or Error (verification failed).
ExportReport export_edited_model(const model::ModelFile& source, const std::vector<LogitEdit>& edits,
                                 const data::Dataset& verify_data, const ExportRequest& request,
                                 const io::WriteProgress& progress = {});

/// Writes `source` with the experts of `removals` removed (one entry per layer) and verifies it like
/// export_edited_model: the reloaded file's logits against the source model's with those experts
/// ablated live, on the first samples of `verify_data` (any data the model reads: a multi-label
/// model's targets are taken from it here, ClassifierModel::prepare). Image classifiers (experts of their μMoE
/// head or of backbone blocks: ViT MLPs, Mixer mixing MLPs) and bare μMoE layers; a GPT is refused.
/// Auto layout as export_edited_model's. Throws as export_edited_model does.
ExportReport export_without_experts(const model::ModelFile& source, const std::vector<ExpertRemoval>& removals,
                                    const data::Dataset& verify_data, const ExportRequest& request,
                                    const io::WriteProgress& progress = {});

nlohmann::json to_json(const ExportReport& report);

}  // namespace mumoe::editing
