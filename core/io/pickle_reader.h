// A restricted reader for the pickles inside PyTorch checkpoint files (`data.pkl` of the zip
// format torch.save writes since PyTorch 1.6). Nothing in the file is ever executed:
//
//   * values: None, bools, integers (up to 64 bits), floats, strings, bytes, tuples, lists, dicts
//     (collections.OrderedDict included: a state_dict is one) and tensors;
//   * the only callables a pickle may name are the handful torch.save itself emits —
//     collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter and the
//     torch.*Storage types of persistent ids. Any other global (a model class, numpy scalars,
//     argparse.Namespace, os.system, …) is refused with a PickleError naming it;
//   * the opcodes of protocols 0–5 that build those values; any other opcode is refused.
//
// Why not LibTorch's own unpickler (torch::pickle_load)? In LibTorch 1.13 it fails on the most
// common file of all — an OrderedDict state_dict (pytorch/pytorch#100741, fixed only in late
// 2024) — and it accepts more than tensors and containers. This reader is small enough to fuzz.
//
// Values live in one arena and refer to each other by index, so hostile pickles — cycles built
// through the memo, million-deep nesting — cannot overflow the stack or leak when freed. Sizes
// are bounded (values, memo entries, string lengths) before anything is allocated for them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mumoe::io {

/// A pickle that is malformed or names something other than tensors and containers.
class PickleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One value of the pickle. Children are indices into PickleValues::nodes.
struct PickleNode {
  enum class Kind { None, Bool, Int, Float, String, Bytes, Tuple, List, Dict, Storage, Tensor, Global };
  Kind kind = Kind::None;
  int64_t integer = 0;  ///< Bool, Int; Storage: element count
  double number = 0;    ///< Float
  std::string text;     ///< String, Bytes; Storage: record key; Tensor: its storage's record key;
                        ///< Global: "module.name"
  std::string dtype;    ///< Storage, Tensor: "Float", "Double", "Half", "BFloat16", "Long", …
  std::vector<int32_t> items;                        ///< Tuple, List
  std::vector<std::pair<int32_t, int32_t>> entries;  ///< Dict (key, value), in pickle order
  int64_t storage_offset = 0;                        ///< Tensor, in elements
  std::vector<int64_t> sizes, strides;               ///< Tensor
};

struct PickleValues {
  std::vector<PickleNode> nodes;
  int32_t root = -1;
  const PickleNode& at(int32_t index) const { return nodes.at(static_cast<size_t>(index)); }
};

/// Limits that bound what a pickle can make the reader allocate: values made, memo entries, the
/// stack's and the open MARKs' depth (both bounded by max_values) and string lengths.
struct PickleLimits {
  int64_t max_values = 20'000'000;
  int64_t max_memo = 20'000'000;
  int64_t max_string_bytes = 1ll << 30;
};

/// Reads one pickle from `bytes`. Throws PickleError with the byte offset and the problem.
PickleValues read_pickle(const uint8_t* bytes, size_t size, const PickleLimits& limits = {});

/// "Float" → 4 (bytes per element) for the storage types torch.save writes; 0 for unknown.
int64_t storage_element_size(const std::string& dtype);

}  // namespace mumoe::io
