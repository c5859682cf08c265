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
#include "editing/export_request.h"
#include "editing/logit_edit.h"
#include "io/safetensors.h"
#include "model/model_file.h"

namespace mumoe::editing {

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


}  // namespace mumoe::editing
