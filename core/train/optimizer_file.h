// Writing an optimizer's state beside a training checkpoint ("MODEL.optim.pt"), atomically: a run
// killed while saving keeps the previous state, and the file goes through the output guard
// (io/output_files.h) like every other file mumoe writes.
#pragma once

#include <torch/torch.h>

#include <string>

#include "io/output_files.h"

namespace mumoe::train {

/// "CHECKPOINT.optim.pt": where the optimizer state of a checkpoint is kept.
inline std::string optimizer_state_path(const std::string& checkpoint_path) { return checkpoint_path + ".optim.pt"; }

template <typename Optimizer>
void save_optimizer_state(const Optimizer& optimizer, const std::string& path) {
  io::TemporaryFile temporary(path);
  temporary.close();
  torch::save(optimizer, temporary.path());
  temporary.move_to(path);
}

}  // namespace mumoe::train
