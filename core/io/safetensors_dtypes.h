// Mapping between safetensors dtype names, element sizes and torch dtypes (internal).
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

namespace mumoe::io::detail {

/// Element size in bytes of a safetensors dtype, or nullopt if the name is not a dtype.
std::optional<int64_t> element_size(const std::string& dtype);

/// The torch dtype mumoe loads a safetensors dtype as, or nullopt if it does not load it.
std::optional<torch::ScalarType> loadable_torch_dtype(const std::string& dtype);

/// The safetensors name of a torch dtype mumoe writes, or nullopt.
std::optional<std::string> writable_dtype_name(torch::ScalarType type);

}  // namespace mumoe::io::detail
