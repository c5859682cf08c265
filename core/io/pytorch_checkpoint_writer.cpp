// Writing what torch.save(state_dict) writes: a zip (LibTorch's PyTorchStreamWriter) holding
// data.pkl — pickle protocol 2 of an OrderedDict whose values are
// torch._utils._rebuild_tensor_v2(persistent storage, offset, size, stride, False, OrderedDict())
// — and one record data/<i> per tensor with its little-endian bytes. The pickle is written by
// hand with the few opcodes that needs, so that torch.load and our restricted reader both read
// it (no TorchScript type tags).
#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include "io/atomic_file.h"
#include "io/errors.h"
#include "io/pytorch_checkpoint.h"

namespace mumoe::io {
namespace {

class PickleWriter {
 public:
  PickleWriter() { bytes_ += "\x80\x02"; }  // PROTO 2
  void global(const std::string& module, const std::string& name) { bytes_ += "c" + module + "\n" + name + "\n"; }
  void mark() { bytes_ += '('; }
  void tuple() { bytes_ += 't'; }
  void empty_tuple() { bytes_ += ')'; }
  void reduce() { bytes_ += 'R'; }
  void setitems() { bytes_ += 'u'; }
  void setitem() { bytes_ += 's'; }
  void empty_dict() { bytes_ += '}'; }
  void persistent_id() { bytes_ += 'Q'; }  // BINPERSID
  void stop() { bytes_ += '.'; }
  void boolean(bool value) { bytes_ += value ? '\x88' : '\x89'; }
  void string(const std::string& s) {
    bytes_ += 'X';  // BINUNICODE: u32 length, UTF-8
    append_le(static_cast<uint64_t>(s.size()), 4);
    bytes_ += s;
  }
  void integer(int64_t value) {
    if (value >= INT32_MIN && value <= INT32_MAX) {
      bytes_ += 'J';  // BININT: i32
      append_le(static_cast<uint64_t>(static_cast<int32_t>(value)), 4);
    } else {
      bytes_ += '\x8a';  // LONG1: 8 bytes, two's complement
      bytes_ += '\x08';
      append_le(static_cast<uint64_t>(value), 8);
    }
  }
  void ordered_dict() {  // collections.OrderedDict()
    global("collections", "OrderedDict");
    empty_tuple();
    reduce();
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void append_le(uint64_t value, int count) {
    for (int i = 0; i < count; ++i) bytes_ += static_cast<char>((value >> (8 * i)) & 0xff);
  }
  std::string bytes_;
};

std::string storage_class(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32: return "FloatStorage";
    case torch::kFloat64: return "DoubleStorage";
    case torch::kFloat16: return "HalfStorage";
    case torch::kBFloat16: return "BFloat16Storage";
    case torch::kInt64: return "LongStorage";
    case torch::kInt32: return "IntStorage";
    case torch::kInt16: return "ShortStorage";
    case torch::kInt8: return "CharStorage";
    case torch::kUInt8: return "ByteStorage";
    case torch::kBool: return "BoolStorage";
    default: throw Error(std::string("cannot write tensors of type ") + c10::toString(type) + " to a checkpoint");
  }
}

}  // namespace

void write_pytorch_checkpoint(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const std::string& state_dict_key) {
  PickleWriter pickle;
  std::vector<torch::Tensor> storages;
  if (!state_dict_key.empty()) {  // {state_dict_key: OrderedDict(...)}
    pickle.empty_dict();
    pickle.string(state_dict_key);
  }
  pickle.ordered_dict();
  pickle.mark();
  for (const auto& [name, value] : tensors) {
    auto tensor = value.detach().to(torch::kCPU).contiguous();
    const auto key = std::to_string(storages.size());
    pickle.string(name);
    pickle.global("torch._utils", "_rebuild_tensor_v2");
    pickle.mark();
    {  // persistent id ('storage', torch.<T>Storage, key, 'cpu', numel)
      pickle.mark();
      pickle.string("storage");
      pickle.global("torch", storage_class(tensor.scalar_type()));
      pickle.string(key);
      pickle.string("cpu");
      pickle.integer(tensor.numel());
      pickle.tuple();
      pickle.persistent_id();
    }
    pickle.integer(0);
    pickle.mark();
    for (auto s : tensor.sizes()) pickle.integer(s);
    pickle.tuple();
    pickle.mark();
    for (auto s : tensor.strides()) pickle.integer(s);
    pickle.tuple();
    pickle.boolean(false);
    pickle.ordered_dict();
    pickle.tuple();
    pickle.reduce();
    storages.push_back(tensor);
  }
  pickle.setitems();
  if (!state_dict_key.empty()) pickle.setitem();
  pickle.stop();

  AtomicFileWriter file(path);
  // The zip writer calls back from miniz (C), and LibTorch 1.13's writer terminates the process
  // when a failed write makes its destructor throw (pytorch/pytorch#87997). So a write error is
  // kept, every later write skipped while the zip "succeeds", and the error rethrown at the end.
  std::exception_ptr write_error;
  try {
    caffe2::serialize::PyTorchStreamWriter zip([&](const void* data, size_t size) -> size_t {
      if (!write_error) {
        try {
          file.write(data, size);
        } catch (...) {
          write_error = std::current_exception();
        }
      }
      return size;
    });
    zip.writeRecord("data.pkl", pickle.bytes().data(), pickle.bytes().size());
    zip.writeRecord("byteorder", "little", 6);
    for (size_t i = 0; i < storages.size() && !write_error; ++i)
      zip.writeRecord("data/" + std::to_string(i), storages[i].data_ptr(), storages[i].nbytes());
    zip.writeEndOfFile();
  } catch (const c10::Error& e) {
    if (write_error) std::rethrow_exception(write_error);
    throw WriteError(path, std::string("cannot write the checkpoint: ") + e.what_without_backtrace());
  }
  if (write_error) std::rethrow_exception(write_error);
  file.commit();
}

}  // namespace mumoe::io
