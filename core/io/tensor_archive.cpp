#include "io/tensor_archive.h"

#include "io/errors.h"
#include "io/file_checks.h"
#include "io/pytorch_checkpoint.h"
#include "io/safetensors.h"

namespace mumoe::io {

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

bool TensorArchive::contains(const std::string& name) const { return index_.count(name) > 0; }

const TensorEntry& TensorArchive::entry(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw FileError(path(), "no tensor named '" + printable(name) + "'");
  return entries()[it->second];
}

void TensorArchive::index_entries() {
  index_.clear();
  const auto& all = entries();
  for (size_t i = 0; i < all.size(); ++i) index_[all[i].name] = i;
}

std::shared_ptr<const TensorArchive> open_tensor_archive(const std::string& path, const std::string& key) {
  require_regular_file(path);
  if (looks_like_zip(path)) return PytorchCheckpoint::open(path, key);
  if (looks_like_legacy_checkpoint(path))
    throw FileError(path, "is a PyTorch checkpoint in the legacy format of PyTorch < 1.6 (a bare pickle, not a zip), "
                          "which is not read: load it and torch.save it again with a current PyTorch");
  if (!key.empty())
    throw UsageError("--key picks a state dict inside a PyTorch checkpoint, but " + path + " is not one");
  try {
    return std::make_shared<SafetensorsFile>(SafetensorsFile::open(path));
  } catch (const FileError& e) {
    // Any file that is neither (an image, a text, random bytes) fails the safetensors header
    // check first: say what the file is not before the detail ("header length 34752… does not
    // fit" alone read like a damaged model).
    if (e.problem().rfind("not a safetensors file", 0) != 0) throw;
    throw FileError(path, "not a model file this program reads: neither a PyTorch checkpoint (.pth/.pt, a zip "
                          "archive) nor a safetensors file (" + e.problem() + ")");
  }
}

}  // namespace mumoe::io
