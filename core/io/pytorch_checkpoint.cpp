#include "io/pytorch_checkpoint.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>

#include "io/errors.h"
#include "io/file_checks.h"
#include "io/pickle_reader.h"

namespace mumoe::io {
namespace {

using Kind = PickleNode::Kind;

struct DtypeInfo {
  const char* pickle;       ///< storage dtype in the pickle
  const char* safetensors;  ///< the name TensorEntry uses
  torch::Dtype torch;
  bool loadable;            ///< what read() returns (the dtypes model files hold)
};
constexpr DtypeInfo kDtypes[] = {
    {"Float", "F32", torch::kFloat32, true},  {"Double", "F64", torch::kFloat64, true},
    {"Half", "F16", torch::kFloat16, true},   {"BFloat16", "BF16", torch::kBFloat16, true},
    {"Long", "I64", torch::kInt64, true},     {"Int", "I32", torch::kInt32, false},
    {"Short", "I16", torch::kInt16, false},   {"Char", "I8", torch::kInt8, false},
    {"Byte", "U8", torch::kUInt8, false},     {"Bool", "BOOL", torch::kBool, false},
};

const DtypeInfo* dtype_info(const std::string& pickle_dtype) {
  for (const auto& d : kDtypes)
    if (pickle_dtype == d.pickle) return &d;
  return nullptr;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

bool is_state_dict(const PickleValues& v, int32_t index) {
  const auto& n = v.at(index);
  if (n.kind != Kind::Dict || n.entries.empty()) return false;
  for (const auto& [k, value] : n.entries)
    if (v.at(k).kind != Kind::String || v.at(value).kind != Kind::Tensor) return false;
  return true;
}

// The state dict of a pickled checkpoint (see the header), and the key it was found under.
std::pair<int32_t, std::string> find_state_dict(const PickleValues& v, const std::string& key, const std::string& path) {
  const auto& root = v.at(v.root);
  std::vector<std::pair<std::string, int32_t>> candidates;
  if (root.kind == Kind::Dict)
    for (const auto& [k, value] : root.entries)
      if (v.at(k).kind == Kind::String && is_state_dict(v, value)) candidates.emplace_back(v.at(k).text, value);
  auto names = [&] {
    std::string out;
    for (const auto& c : candidates) out += (out.empty() ? "'" : ", '") + printable(c.first) + "'";
    return out;
  };
  if (!key.empty()) {
    for (const auto& c : candidates)
      if (c.first == key) return {c.second, key};
    throw FileError(path, "has no state dict under the key '" + printable(key) + "'" +
                              (is_state_dict(v, v.root) ? std::string(" (the saved object is itself the state dict: "
                                                                      "leave out --key)")
                               : candidates.empty()     ? std::string(" (it holds none under any key)")
                                                        : " (state dicts are under " + names() + ")"));
  }
  if (is_state_dict(v, v.root)) return {v.root, ""};
  if (candidates.size() == 1) return {candidates[0].second, candidates[0].first};
  if (candidates.empty())
    throw FileError(path, "holds no state dict (a dict of names to tensors), neither as the saved object nor "
                          "under a top-level key");
  throw FileError(path, "holds several state dicts (" + names() + "): choose one with --key");
}

// A plain value of the pickle as JSON, or nullopt when it holds anything else (a tensor, a
// storage, a global): what side_values() keeps. Nesting is bounded, so a cycle built through the
// memo ends here too; long lists and strings are not kept (they are no configuration). `budget`
// counts the values built over all calls: the memo lets a pickle share one list many times at
// every level, which expanded would grow exponentially — past the budget, nothing more is kept.
std::optional<nlohmann::json> plain_value(const PickleValues& v, int32_t index, int64_t& budget, int depth = 0) {
  constexpr int kMaxDepth = 16;
  constexpr size_t kMaxItems = 4096, kMaxText = 65536;
  if (depth > kMaxDepth || --budget < 0) return std::nullopt;
  const auto& n = v.at(index);
  switch (n.kind) {
    case Kind::None: return nlohmann::json(nullptr);
    case Kind::Bool: return nlohmann::json(n.integer != 0);
    case Kind::Int: return nlohmann::json(n.integer);
    case Kind::Float: return std::isfinite(n.number) ? nlohmann::json(n.number) : nlohmann::json(nullptr);
    case Kind::String:
      if (n.text.size() > kMaxText) return std::nullopt;
      try {  // a string that is not UTF-8 could not be printed as JSON later: not kept
        (void)nlohmann::json(n.text).dump();
      } catch (const nlohmann::json::exception&) {
        return std::nullopt;
      }
      return nlohmann::json(n.text);
    case Kind::Tuple:
    case Kind::List: {
      if (n.items.size() > kMaxItems) return std::nullopt;
      auto out = nlohmann::json::array();
      for (const auto item : n.items) {
        auto value = plain_value(v, item, budget, depth + 1);
        if (!value) return std::nullopt;
        out.push_back(std::move(*value));
      }
      return out;
    }
    case Kind::Dict: {
      if (n.entries.size() > kMaxItems) return std::nullopt;
      auto out = nlohmann::json::object();
      for (const auto& [k, value] : n.entries) {
        const auto& key = v.at(k);
        if (key.kind != Kind::String) return std::nullopt;
        auto plain = plain_value(v, value, budget, depth + 1);
        if (!plain) return std::nullopt;
        out[key.text] = std::move(*plain);
      }
      return out;
    }
    default: return std::nullopt;
  }
}

int64_t checked_product(const std::vector<int64_t>& sizes, const std::string& path, const std::string& name) {
  int64_t n = 1;
  for (const auto s : sizes) {
    if (s < 0) throw FileError(path, "tensor '" + printable(name) + "' has a negative size");
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s)
      throw FileError(path, "tensor '" + printable(name) + "' has more elements than 64 bits can count");
    n *= s;
  }
  return n;
}

}  // namespace

bool looks_like_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

bool looks_like_legacy_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[13] = {};
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return false;
  // PROTO n, then LONG1 of 10 bytes: the magic number little-endian (6c fc 9c 46 f9 20 6a a8 50 19).
  static const unsigned char magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  return head[0] == 0x80 && head[1] >= 2 && head[2] == 0x8a && head[3] == 10 && std::memcmp(head + 4, magic, 9) == 0;
}

PytorchCheckpoint::~PytorchCheckpoint() = default;

std::shared_ptr<PytorchCheckpoint> PytorchCheckpoint::open(const std::string& path, const std::string& key) {
  require_regular_file(path);
  if (!looks_like_zip(path))
    throw FileError(path, "is not a zip archive, so not a checkpoint of torch.save in PyTorch ≥ 1.6 (the legacy "
                          "format is not read: load and save it again with a current PyTorch)");
  std::shared_ptr<PytorchCheckpoint> out(new PytorchCheckpoint());
  out->path_ = path;
  PickleValues values;
  // Every record's size from the zip's own directory, before LibTorch's reader inflates any.
  out->records_ = records_by_name(read_zip_directory(path));
  try {
    out->reader_ = std::make_shared<caffe2::serialize::PyTorchStreamReader>(path);
    auto& reader = *out->reader_;
    if (reader.hasRecord("constants.pkl"))
      throw FileError(path, "is a TorchScript archive (torch.jit.save), not a checkpoint of tensors");
    if (reader.hasRecord("byteorder")) {
      const auto [data, size] = reader.getRecord("byteorder");
      const std::string order(static_cast<const char*>(data.get()), size);
      if (order != "little") throw FileError(path, "stores its tensors " + printable(order) + "-endian");
    }
    if (!reader.hasRecord("data.pkl")) throw FileError(path, "is a zip archive without data.pkl: not a checkpoint");
    // A state dict's pickle is about a hundred bytes per tensor; one that inflates past this is
    // no checkpoint of tensors (a deflated run of DUP opcodes made gigabytes of stack).
    constexpr uint64_t kMaxPickleBytes = uint64_t{256} << 20;
    const auto pickle = out->records_.find("data.pkl");
    if (pickle == out->records_.end() || pickle->second.uncompressed_size > kMaxPickleBytes)
      throw FileError(path, "data.pkl " + (pickle == out->records_.end()
                                               ? std::string("is not in the zip's directory")
                                               : "inflates to " + std::to_string(pickle->second.uncompressed_size) +
                                                     " bytes, more than the " + std::to_string(kMaxPickleBytes) +
                                                     "-byte limit of a checkpoint's pickle"));
    const auto [data, size] = reader.getRecord("data.pkl");
    // Bounds on what the pickle may build, by what a state dict needs: the values it creates (a
    // few per tensor), its memo and its stack.
    PickleLimits limits;
    limits.max_values = 4'000'000;
    limits.max_memo = 4'000'000;
    values = read_pickle(static_cast<const uint8_t*>(data.get()), size, limits);
  } catch (const PickleError& e) {
    throw FileError(path, std::string("data.pkl: ") + e.what());
  } catch (const c10::Error& e) {
    throw FileError(path, "damaged checkpoint archive: " + first_line(e.what_without_backtrace()));
  } catch (const std::logic_error& e) {
    // LibTorch's archive reader parses the "version" record with std::stoull, whose out_of_range
    // or invalid_argument would otherwise reach the user as a bare "stoull".
    throw FileError(path, std::string("damaged checkpoint archive: its version record cannot be read (") + e.what() +
                              ")");
  }

  const auto [dict, found_key] = find_state_dict(values, key, path);
  out->key_ = found_key;
  const auto& root = values.at(values.root);
  int64_t budget = 100'000;  // values of side_values() in all: far more than any configuration
  if (root.kind == Kind::Dict && dict != values.root)
    for (const auto& [k, value] : root.entries)
      if (values.at(k).kind == Kind::String)
        if (auto plain = plain_value(values, value, budget)) out->side_values_[values.at(k).text] = std::move(*plain);
  std::map<std::string, TensorView> views;  // a repeated key keeps its last value, as in Python
  for (const auto& [k, value] : values.at(dict).entries) {
    const auto& t = values.at(value);
    const std::string& name = values.at(k).text;
    const auto* info = dtype_info(t.dtype);
    if (!info) throw FileError(path, "tensor '" + printable(name) + "' has an unknown storage type");
    const int64_t numel = checked_product(t.sizes, path, name);
    if (t.storage_offset < 0) throw FileError(path, "tensor '" + printable(name) + "' has a negative storage offset");
    // A view of more elements than its storage holds (stride 0, overlapping strides) would be
    // materialised element by element: a 1.8 KB file of such views reached 3.9 GB.
    if (numel > t.integer)
      throw FileError(path, "tensor '" + printable(name) + "' views " + std::to_string(numel) +
                                " elements of a storage of " + std::to_string(t.integer) +
                                " (repeated by stride 0 or overlapping strides): not a tensor torch.save writes for a "
                                "state dict");
    if (numel > 0) {
      // The last element the view reaches must lie inside the storage.
      __int128 last = t.storage_offset;
      for (size_t d = 0; d < t.sizes.size(); ++d) {
        if (t.strides[d] < 0) throw FileError(path, "tensor '" + printable(name) + "' has a negative stride");
        last += static_cast<__int128>(t.sizes[d] - 1) * t.strides[d];
      }
      if (last >= t.integer)
        throw FileError(path, "tensor '" + printable(name) + "' reaches past the end of its storage of " +
                                  std::to_string(t.integer) + " elements");
    }
    views[name] = TensorView{t.text, t.dtype, t.integer, t.storage_offset, t.sizes, t.strides};
  }
  for (const auto& [name, view] : views) {
    TensorEntry e;
    e.name = name;
    e.dtype = dtype_info(view.dtype)->safetensors;
    e.shape = view.sizes;
    out->entries_.push_back(std::move(e));
  }
  out->views_ = std::move(views);
  out->index_entries();
  return out;
}

torch::Tensor PytorchCheckpoint::read(const std::string& name) const {
  entry(name);  // throws for an unknown name
  const auto& view = views_.at(name);
  const auto* info = dtype_info(view.dtype);
  if (!info->loadable)
    throw FileError(path_, "tensor '" + printable(name) + "' has dtype " + info->safetensors +
                               ", which mumoe does not load (supported: F32, F64, F16, BF16; I64 for integer buffers)");
  const std::string record = "data/" + view.record;
  try {
    if (!reader_->hasRecord(record))
      throw FileError(path_, "tensor '" + printable(name) + "': its storage record " + printable(record) + " is missing");
    const int64_t element = storage_element_size(view.dtype);
    // The record's size from the zip's directory against the pickle's announcement before the
    // reader inflates it (a record inflating to 3 GiB was allocated before the check).
    const auto member = records_.find(record);
    if (member == records_.end() ||
        static_cast<__int128>(member->second.uncompressed_size) != static_cast<__int128>(view.storage_numel) * element)
      throw FileError(path_, "tensor '" + printable(name) + "': storage record " + printable(record) + " holds " +
                                 (member == records_.end() ? std::string("bytes the zip's directory does not list")
                                                           : std::to_string(member->second.uncompressed_size) + " bytes") +
                                 ", but the pickle announces " + std::to_string(view.storage_numel) + " elements of " +
                                 std::to_string(element) + " bytes");
    const auto [data, size] = reader_->getRecord(record);
    if (static_cast<__int128>(size) != static_cast<__int128>(view.storage_numel) * element)
      throw FileError(path_, "tensor '" + printable(name) + "': storage record " + printable(record) + " holds " +
                                 std::to_string(size) + " bytes, but the pickle announces " +
                                 std::to_string(view.storage_numel) + " elements of " + std::to_string(element) +
                                 " bytes");
    auto out = torch::empty(view.sizes, torch::dtype(info->torch));
    if (out.numel() == 0) return out;
    const auto storage = torch::from_blob(data.get(), {view.storage_numel}, torch::dtype(info->torch));
    out.copy_(storage.as_strided(view.sizes, view.strides, view.offset));
    return out;
  } catch (const c10::Error& e) {
    throw FileError(path_, "tensor '" + printable(name) + "': damaged storage record: " +
                               first_line(e.what_without_backtrace()));
  }
}

}  // namespace mumoe::io
