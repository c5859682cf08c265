#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "io/errors.h"
#include "io/json_file.h"
#include "io/file_checks.h"
#include "io/safetensors.h"
#include "io/safetensors_dtypes.h"

namespace mumoe::io {
namespace {

// Refuse absurd headers before allocating for them (the reference library uses 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

uint64_t read_le_u64(const unsigned char* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

std::vector<int64_t> parse_shape(const std::string& path, const std::string& name,
                                 const nlohmann::json& shape) {
  if (!shape.is_array()) throw FileError(path, "tensor '" + printable(name) + "': shape is not a list");
  std::vector<int64_t> out;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw FileError(path, "tensor '" + printable(name) + "': shape " + shape.dump() +
                                " must hold non-negative integers");
    out.push_back(d.get<int64_t>());
  }
  return out;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  require_regular_file(path);  // a FIFO would block the read below forever
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the file (missing or unreadable)");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8)
    throw FileError(path, "not a safetensors file: " + std::to_string(file_size) +
                              " bytes is shorter than the 8-byte header length");
  unsigned char len_bytes[8];
  if (!in.read(reinterpret_cast<char*>(len_bytes), 8)) throw FileError(path, "could not read the header length");
  const uint64_t header_len = read_le_u64(len_bytes);
  if (header_len > file_size - 8)
    throw FileError(path, "not a safetensors file: header length " + std::to_string(header_len) +
                              " does not fit in the " + std::to_string(file_size) +
                              "-byte file (truncated or not safetensors)");
  if (header_len > kMaxHeaderBytes)
    throw FileError(path, "the safetensors header is " + std::to_string(header_len) +
                              " bytes, more than the " + std::to_string(kMaxHeaderBytes) +
                              "-byte limit (not a model file this program writes or reads)");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) throw FileError(path, "could not read the header");

  const auto json = parse_bounded_json(header, path, "header");
  if (!json.is_object()) throw FileError(path, "header is not a JSON object");

  SafetensorsFile file;
  file.path_ = path;
  file.data_start_ = 8 + header_len;
  const uint64_t data_size = file_size - file.data_start_;

  for (auto it = json.begin(); it != json.end(); ++it) {
    const std::string& name = it.key();
    const auto& value = it.value();
    if (name == "__metadata__") {
      if (!value.is_object()) throw FileError(path, "__metadata__ is not a JSON object");
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m.value().is_string())
          throw FileError(path, "__metadata__ value for '" + printable(m.key()) + "' is not a string");
        file.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets"))
      throw FileError(path, "tensor '" + printable(name) + "' needs dtype, shape and data_offsets");
    TensorEntry entry;
    entry.name = name;
    if (!value["dtype"].is_string()) throw FileError(path, "tensor '" + printable(name) + "': dtype is not a string");
    entry.dtype = value["dtype"].get<std::string>();
    const auto elem = detail::element_size(entry.dtype);
    if (!elem) throw FileError(path, "tensor '" + printable(name) + "': unknown dtype '" + printable(entry.dtype) + "'");
    entry.shape = parse_shape(path, name, value["shape"]);
    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw FileError(path, "tensor '" + printable(name) + "': data_offsets must be two non-negative integers");
    entry.begin = offsets[0].get<uint64_t>();
    entry.end = offsets[1].get<uint64_t>();
    if (entry.begin > entry.end)
      throw FileError(path, "tensor '" + printable(name) + "': data_offsets [" + std::to_string(entry.begin) +
                                ", " + std::to_string(entry.end) + "] are reversed (begin after end)");
    if (entry.end > data_size)
      throw FileError(path, "tensor '" + printable(name) + "': data_offsets [" + std::to_string(entry.begin) +
                                ", " + std::to_string(entry.end) + "] lie outside the " +
                                std::to_string(data_size) + "-byte data area (truncated file?)");
    // numel × element size, guarding against overflow from hostile shapes.
    long double expected = static_cast<long double>(*elem);
    for (auto d : entry.shape) expected *= static_cast<long double>(d);
    if (expected != static_cast<long double>(entry.end - entry.begin)) {
      // A hostile shape can need more bytes than any integer type holds: say so instead of
      // printing a wrapped-around count.
      const bool representable = expected < static_cast<long double>(std::numeric_limits<uint64_t>::max());
      char huge[32];
      std::snprintf(huge, sizeof huge, "%.3Le", expected);
      throw FileError(path, "tensor '" + printable(name) + "': " + std::to_string(entry.end - entry.begin) +
                                " bytes of data but shape " + value["shape"].dump() + " of " + entry.dtype +
                                " needs " +
                                (representable ? std::to_string(static_cast<uint64_t>(expected))
                                               : std::string(huge) + " (more than any file can hold)"));
    }
    file.entries_.push_back(std::move(entry));
  }

  std::sort(file.entries_.begin(), file.entries_.end(),
            [](const TensorEntry& a, const TensorEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  for (size_t i = 1; i < file.entries_.size(); ++i) {
    const auto& prev = file.entries_[i - 1];
    const auto& cur = file.entries_[i];
    if (cur.begin < prev.end)
      throw FileError(path, "tensors '" + printable(prev.name) + "' and '" + printable(cur.name) + "' overlap in the data area");
  }
  file.index_entries();
  return file;
}

torch::Tensor SafetensorsFile::read(const std::string& name) const {
  const auto& e = entry(name);
  const auto type = detail::loadable_torch_dtype(e.dtype);
  if (!type)
    throw FileError(path_, "tensor '" + printable(name) + "' has dtype " + e.dtype +
                               ", which mumoe does not load (supported: F32, F64, F16, BF16; "
                               "I64 for integer buffers)");
  auto tensor = torch::empty(e.shape, torch::dtype(*type));
  const uint64_t bytes = e.end - e.begin;
  if (bytes == 0) return tensor;
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw FileError(path_, "cannot reopen the file to read tensor '" + name + "'");
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  in.read(static_cast<char*>(tensor.data_ptr()), static_cast<std::streamsize>(bytes));
  if (!in || static_cast<uint64_t>(in.gcount()) != bytes)
    throw FileError(path_, "tensor '" + printable(name) + "': the file ended before its data (truncated?)");
  return tensor;
}

}  // namespace mumoe::io
