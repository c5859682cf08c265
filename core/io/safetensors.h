// A validating safetensors reader and an atomic writer (spec §2).
//
// Layout: 8-byte little-endian header length n, n bytes of JSON, then raw little-endian data.
// open() validates the whole header before any tensor is read: the header length lies inside
// the file, the JSON is a well-formed object, every dtype is known, every shape is a list of
// non-negative integers, every data range lies inside the data area, ranges do not overlap, and
// each range's length equals numel × element size. Nothing in the file is ever executed.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/tensor_archive.h"

namespace mumoe::io {

class SafetensorsFile final : public TensorArchive {
 public:
  /// Opens `path` and validates its header (no tensor data is read). Throws FileError.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const override { return path_; }
  /// The optional "__metadata__" string map.
  const std::map<std::string, std::string>& metadata() const override { return metadata_; }
  /// Tensor entries in file order (by offset).
  const std::vector<TensorEntry>& entries() const override { return entries_; }

  /// Reads one tensor into a new CPU tensor of the matching torch dtype. Supported dtypes are
  /// F32, F64, F16, BF16 and I64 (for integer buffers such as BatchNorm's
  /// num_batches_tracked); any other dtype is rejected with an error naming it.
  torch::Tensor read(const std::string& name) const override;
  std::string format_name() const override { return "safetensors"; }

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorEntry> entries_;
};

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

/// Called with (bytes written, total bytes); return false to cancel (the write then throws
/// mumoe::Cancelled and the destination is untouched).
using WriteProgress = std::function<bool(uint64_t, uint64_t)>;

/// Writes tensors (F32, F64, F16, BF16 or I64; any device; any layout) and metadata to `path`
/// atomically. Throws UsageError for unsupported dtypes or duplicate names, WriteError for
/// I/O failures (the destination keeps its old content in every failure case).
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       const WriteProgress& progress = {});

}  // namespace mumoe::io
