// Parsing the --device option shared by every command that runs a model.
#pragma once

#include <torch/types.h>

#include <string>

namespace mumoe::nn {

/// "cpu", "cuda" or "cuda:N". Throws UsageError for anything else or when CUDA is unavailable.
torch::Device parse_device(const std::string& name);

}  // namespace mumoe::nn
