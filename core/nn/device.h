// Parsing the --device option shared by every command that runs a model.
#pragma once

#include <torch/types.h>

#include <string>

namespace mumoe::nn {

/// "cpu", "cuda" or "cuda:N". Throws UsageError for anything else, when CUDA is unavailable, or
/// when N is not one of the machine's GPUs.
torch::Device parse_device(const std::string& name);

}  // namespace mumoe::nn
