#include "io/safetensors_dtypes.h"

#include <map>

namespace mumoe::io::detail {

std::optional<int64_t> element_size(const std::string& dtype) {
  // Every dtype the safetensors format defines, so that files holding dtypes we do not load
  // still validate and the error can name the dtype.
  static const std::map<std::string, int64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end()) return std::nullopt;
  return it->second;
}

std::optional<torch::ScalarType> loadable_torch_dtype(const std::string& dtype) {
  if (dtype == "F32") return torch::kFloat32;
  if (dtype == "F64") return torch::kFloat64;
  if (dtype == "F16") return torch::kFloat16;
  if (dtype == "BF16") return torch::kBFloat16;
  if (dtype == "I64") return torch::kInt64;
  return std::nullopt;
}

std::optional<std::string> writable_dtype_name(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32: return "F32";
    case torch::kFloat64: return "F64";
    case torch::kFloat16: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kInt64: return "I64";
    default: return std::nullopt;
  }
}

}  // namespace mumoe::io::detail
