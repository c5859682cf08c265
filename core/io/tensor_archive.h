// A file of named tensors, whatever its format: what a model file is read from. Two formats
// implement it — safetensors (io/safetensors.h) and PyTorch checkpoints written by torch.save
// (io/pytorch_checkpoint.h) — and open_tensor_archive() tells them apart by their first bytes,
// not by the file name.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>

#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

namespace mumoe::io {

/// Where one tensor lives in its file. For safetensors, begin/end are offsets relative to the
/// start of the data area; other formats leave them 0.
struct TensorEntry {
  std::string name;
  std::string dtype;  ///< safetensors dtype name: "F32", "BF16", "I64", …
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  int64_t numel() const;
};

class TensorArchive {
 public:
  virtual ~TensorArchive() = default;
  virtual const std::string& path() const = 0;
  /// String metadata (safetensors "__metadata__"; for a checkpoint, none).
  virtual const std::map<std::string, std::string>& metadata() const = 0;
  /// Every tensor's entry, in file order.
  virtual const std::vector<TensorEntry>& entries() const = 0;
  bool contains(const std::string& name) const;
  /// Throws FileError if there is no such tensor.
  const TensorEntry& entry(const std::string& name) const;
  /// Reads one tensor into a new contiguous CPU tensor. F32, F64, F16, BF16 and I64 are
  /// supported; any other dtype is a FileError naming it. Throws FileError for damaged data.
  virtual torch::Tensor read(const std::string& name) const = 0;
  /// "safetensors" or "PyTorch checkpoint".
  virtual std::string format_name() const = 0;
  /// Where in the file the state dict is: "" (the whole file), or the top-level key of a PyTorch
  /// checkpoint that holds it beside other entries ("model" in nanoGPT's ckpt.pt).
  virtual std::string state_dict_key() const { return ""; }
  /// The plain values beside the state dict of a checkpoint whose top level is a dict: numbers,
  /// strings, bools, None, and lists and dicts of them, as JSON (nanoGPT's ckpt.pt:
  /// {"model_args": {"n_layer": 12, …}, "iter_num": 5000, "config": {…}}). Entries that hold
  /// tensors (the state dict, an optimizer's state) are left out. An empty object when there is
  /// nothing such (every safetensors file).
  virtual nlohmann::json side_values() const { return nlohmann::json::object(); }

 protected:
  /// Index of entries() by name (built by the implementations once their entries are final).
  void index_entries();

 private:
  std::map<std::string, size_t> index_;
};

/// Opens `path` as a safetensors file or a PyTorch checkpoint (zip written by torch.save),
/// decided by its first bytes. `key` picks the state dict inside a checkpoint that holds several
/// (e.g. "model"; "" = found automatically); it is an error for a safetensors file. Throws
/// FileError naming the file and the problem.
std::shared_ptr<const TensorArchive> open_tensor_archive(const std::string& path, const std::string& key = "");

}  // namespace mumoe::io
