// PyTorch checkpoint files: what `torch.save(obj, "model-0.pth")` writes (the zip format of
// PyTorch ≥ 1.6), read without running any of it.
//
// The zip is opened with LibTorch's own archive reader (caffe2::serialize::PyTorchStreamReader,
// which checks the zip structure and finds the records under the archive's top folder);
// `data.pkl` is read by the restricted unpickler of io/pickle_reader.h, which accepts only
// tensors, dicts (OrderedDict included), lists, tuples, numbers, strings, None and bools; each
// tensor's bytes come from its storage record `data/<key>`, checked against the storage size the
// pickle announces and the tensor's offset, sizes and strides before they are viewed.
//
// The state dict is found where it is unambiguous:
//   * the pickled object itself when it maps names to tensors (torch.save(model.state_dict()));
//   * else the one entry of the top-level dict that does ({"model": state_dict, "model_args": …}
//     of nanoGPT, {"state_dict": …, "epoch": …} of training scripts);
//   * else `key` must name it, and the error lists the candidates.
// Tensors are exposed by their key in the state dict; non-tensor entries (e.g. a scalar `epoch`
// stored beside the weights) are skipped.
//
// Refused with a FileError naming the file: the legacy pre-1.6 format (not a zip), TorchScript
// archives (torch.jit.save), pickles naming any other class, big-endian data, damaged zips and
// records, and storages that do not hold what their tensors need.
#pragma once

#include <memory>
#include <string>

#include "io/safetensors.h"
#include "io/tensor_archive.h"
#include "io/zip_directory.h"

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace mumoe::io {

class PytorchCheckpoint final : public TensorArchive {
 public:
  /// Opens and validates the archive and its pickle (no tensor data is read yet).
  static std::shared_ptr<PytorchCheckpoint> open(const std::string& path, const std::string& key = "");
  ~PytorchCheckpoint() override;

  const std::string& path() const override { return path_; }
  const std::map<std::string, std::string>& metadata() const override { return metadata_; }
  const std::vector<TensorEntry>& entries() const override { return entries_; }
  torch::Tensor read(const std::string& name) const override;
  std::string format_name() const override { return "PyTorch checkpoint"; }
  /// Where the state dict was found: "" (the whole object) or the top-level key.
  std::string state_dict_key() const override { return key_; }
  nlohmann::json side_values() const override { return side_values_; }

 private:
  struct TensorView {
    std::string record;   ///< storage key
    std::string dtype;    ///< pickle storage dtype ("Float", …)
    int64_t storage_numel = 0;
    int64_t offset = 0;
    std::vector<int64_t> sizes, strides;
  };
  PytorchCheckpoint() = default;

  std::string path_;
  std::string key_;
  nlohmann::json side_values_ = nlohmann::json::object();
  std::map<std::string, std::string> metadata_;
  std::vector<TensorEntry> entries_;
  std::map<std::string, TensorView> views_;
  std::map<std::string, ZipMember> records_;  ///< sizes from the zip's directory, by record name
  std::shared_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
};

/// Writes `tensors` as torch.save(OrderedDict(tensors)) would (zip format, pickle protocol 2), so
/// `model.load_state_dict(torch.load(path))` reads it — or, with `state_dict_key`, as
/// torch.save({state_dict_key: OrderedDict(tensors)}); atomically. Throws WriteError (I/O) or
/// Error (a dtype a checkpoint cannot hold).
void write_pytorch_checkpoint(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const std::string& state_dict_key = "");

/// True when the file starts like a zip archive (what torch.save writes).
bool looks_like_zip(const std::string& path);

/// True when the file starts like torch.save's legacy format (PyTorch < 1.6, or
/// _use_new_zipfile_serialization=False): a pickle (protocol 2+, 0x80 NN) whose first value is
/// the legacy magic number 0x1950a86a20f9469cfc6c.
bool looks_like_legacy_checkpoint(const std::string& path);

}  // namespace mumoe::io
