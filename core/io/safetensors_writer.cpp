#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <set>

#include "io/atomic_file.h"
#include "io/errors.h"
#include "io/safetensors.h"
#include "io/safetensors_dtypes.h"

namespace mumoe::io {

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const WriteProgress& progress) {
  // Prepare everything (and fail on bad input) before the destination directory is touched.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> contiguous;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& nt : tensors) {
    if (nt.name.empty() || nt.name == "__metadata__")
      throw UsageError("invalid tensor name '" + nt.name + "' for " + path);
    if (!names.insert(nt.name).second)
      throw UsageError("tensor name '" + nt.name + "' appears twice in " + path);
    const auto dtype = detail::writable_dtype_name(nt.tensor.scalar_type());
    if (!dtype)
      throw UsageError("tensor '" + nt.name + "' has dtype " +
                       std::string(c10::toString(nt.tensor.scalar_type())) +
                       "; safetensors files are written as F32, F64, F16, BF16 or I64");
    auto t = nt.tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[nt.name] = {{"dtype", *dtype},
                       {"shape", t.sizes().vec()},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(t));
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // align the data area to 8 bytes
  const uint64_t total = 8 + header_text.size() + offset;

  AtomicFileWriter out(path);
  unsigned char len_bytes[8];
  uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  out.write(len_bytes, 8);
  out.write(header_text.data(), header_text.size());
  uint64_t written = 8 + header_text.size();
  constexpr uint64_t kChunk = 4u << 20;
  for (const auto& t : contiguous) {
    const char* data = static_cast<const char*>(t.data_ptr());
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    for (uint64_t done = 0; done < bytes; done += kChunk) {
      const uint64_t chunk = std::min(kChunk, bytes - done);
      out.write(data + done, chunk);
      written += chunk;
      if (progress && !progress(written, total)) throw Cancelled();
    }
  }
  if (progress && !progress(written, total)) throw Cancelled();
  out.commit();
}

}  // namespace mumoe::io
