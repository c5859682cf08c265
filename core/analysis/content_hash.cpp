#include "analysis/content_hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "io/errors.h"

namespace mumoe::analysis {
namespace {

struct StateDeleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};
using State = std::unique_ptr<XXH3_state_t, StateDeleter>;

State new_state() {
  State s(XXH3_createState());
  XXH3_128bits_reset(s.get());
  return s;
}

std::string hex(const XXH3_state_t* s) {
  const XXH128_hash_t h = XXH3_128bits_digest(s);
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return out;
}

}  // namespace

std::string hash_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw FileError(path, "cannot be read");
  auto state = new_state();
  std::vector<char> buffer(1 << 20);
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), f.get())) > 0) XXH3_128bits_update(state.get(), buffer.data(), n);
  if (std::ferror(f.get())) throw FileError(path, "read error while hashing");
  return hex(state.get());
}

std::string hash_tensors(const std::vector<torch::Tensor>& tensors) {
  auto state = new_state();
  for (const auto& t : tensors) {
    if (!t.defined()) {
      const int64_t marker = -1;
      XXH3_128bits_update(state.get(), &marker, sizeof marker);
      continue;
    }
    const auto c = t.contiguous().cpu();
    const std::string header = std::string(c10::toString(c.scalar_type())) + c10::str(c.sizes());
    XXH3_128bits_update(state.get(), header.data(), header.size());
    XXH3_128bits_update(state.get(), c.data_ptr(), c.numel() * c.element_size());
  }
  return hex(state.get());
}

uint64_t values_checksum(const torch::Tensor& values) {
  const auto c = values.contiguous().cpu();
  // The dtype counts: the same bytes as float32 and as something else are other values.
  const auto dtype = static_cast<uint64_t>(c.scalar_type());
  const uint64_t h = XXH3_64bits_withSeed(c.data_ptr(), c.numel() * c.element_size(), dtype);
  return h ? h : 1;  // 0 means "stored" in cache::ChunkRecord::left_to_model
}

}  // namespace mumoe::analysis
