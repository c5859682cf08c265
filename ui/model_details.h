// The Model page's details pane: one μMoE layer of a model file (variant, expert modes, ranks,
// shape, gating, parameters) and the file itself (format, architecture, backbone, test accuracy,
// labels, attributes, provenance), as HTML. Torch-free (model/model_summary.h).
#pragma once

#include <QString>

#include <cstddef>

#include "model/model_summary.h"

namespace mumoe::ui {

/// The details of `summary.layers[layerIndex]` and of the file. Throws std::out_of_range for a
/// layer index past the end.
QString layerDetailsHtml(const model::ModelSummary& summary, size_t layerIndex);

}  // namespace mumoe::ui
