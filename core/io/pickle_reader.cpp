#include "io/pickle_reader.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

namespace mumoe::io {
namespace {

using Kind = PickleNode::Kind;

// The storage types torch.save names in persistent ids, by their dtype.
struct StorageType {
  const char* name;
  const char* dtype;
  int64_t element_size;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", "Float", 4},   {"DoubleStorage", "Double", 8}, {"HalfStorage", "Half", 2},
    {"BFloat16Storage", "BFloat16", 2}, {"LongStorage", "Long", 8}, {"IntStorage", "Int", 4},
    {"ShortStorage", "Short", 2},   {"CharStorage", "Char", 1},     {"ByteStorage", "Byte", 1},
    {"BoolStorage", "Bool", 1},
};

class Machine {
 public:
  Machine(const uint8_t* bytes, size_t size, const PickleLimits& limits)
      : p_(bytes), size_(size), limits_(limits) {}

  PickleValues run() {
    while (true) {
      const size_t at = pos_;
      const uint8_t op = byte();
      switch (op) {
        case 0x80: {  // PROTO
          const uint8_t version = byte();
          if (version > 5) fail(at, "pickle protocol " + std::to_string(version) + " is newer than 5");
          break;
        }
        case 0x95: take(8); break;  // FRAME: framing only, the opcodes follow as usual
        case '.': {                 // STOP
          PickleValues out;
          out.root = pop(at);
          out.nodes = std::move(nodes_);
          return out;
        }
        case '(':  // MARK
          if (static_cast<int64_t>(marks_.size()) >= limits_.max_values)
            fail(pos_, "more than " + std::to_string(limits_.max_values) + " open MARKs");
          marks_.push_back(stack_.size());
          break;
        case 'N': push(make(Kind::None)); break;
        case 0x88: push_bool(true); break;   // NEWTRUE
        case 0x89: push_bool(false); break;  // NEWFALSE
        case 'J': push_int(static_cast<int32_t>(le(4))); break;                    // BININT
        case 'K': push_int(static_cast<int64_t>(le(1))); break;                    // BININT1
        case 'M': push_int(static_cast<int64_t>(le(2))); break;                    // BININT2
        case 0x8a: push_int(long_integer(at, le(1))); break;                       // LONG1
        case 0x8b: push_int(long_integer(at, le(4))); break;                       // LONG4
        case 'I': push_text_int(at, line(at)); break;                              // INT
        case 'L': {                                                                // LONG
          auto text = line(at);
          if (!text.empty() && text.back() == 'L') text.pop_back();
          push_text_int(at, text);
          break;
        }
        case 'G': {  // BINFLOAT: big-endian IEEE 754
          uint64_t bits = 0;
          const uint8_t* b = take(8);
          for (int i = 0; i < 8; ++i) bits = (bits << 8) | b[i];
          double v;
          std::memcpy(&v, &bits, sizeof v);
          push_float(v);
          break;
        }
        case 'F': {  // FLOAT (text)
          const auto text = line(at);
          char* end = nullptr;
          const double v = std::strtod(text.c_str(), &end);
          if (text.empty() || end != text.c_str() + text.size()) fail(at, "FLOAT '" + text + "' is not a number");
          push_float(v);
          break;
        }
        case 'X': push_text(Kind::String, le(4)); break;     // BINUNICODE
        case 0x8c: push_text(Kind::String, le(1)); break;    // SHORT_BINUNICODE
        case 0x8d: push_text(Kind::String, le(8)); break;    // BINUNICODE8
        case 'T': push_text(Kind::String, le(4)); break;     // BINSTRING (Python 2 str)
        case 'U': push_text(Kind::String, le(1)); break;     // SHORT_BINSTRING
        case 'B': push_text(Kind::Bytes, le(4)); break;      // BINBYTES
        case 'C': push_text(Kind::Bytes, le(1)); break;      // SHORT_BINBYTES
        case 0x8e: push_text(Kind::Bytes, le(8)); break;     // BINBYTES8
        case ')': push(make(Kind::Tuple)); break;            // EMPTY_TUPLE
        case ']': push(make(Kind::List)); break;             // EMPTY_LIST
        case '}': push(make(Kind::Dict)); break;             // EMPTY_DICT
        case 0x85: push_tuple(at, 1); break;                 // TUPLE1
        case 0x86: push_tuple(at, 2); break;                 // TUPLE2
        case 0x87: push_tuple(at, 3); break;                 // TUPLE3
        case 't': push_marked(at, Kind::Tuple); break;      // TUPLE
        case 'l': push_marked(at, Kind::List); break;       // LIST
        case 'd': {  // DICT
          const auto items = pop_to_mark(at);
          const auto d = make(Kind::Dict);
          add_entries(at, d, items);
          push(d);
          break;
        }
        case 'a': {  // APPEND
          const auto value = pop(at);
          append(at, top(at), {value});
          break;
        }
        case 'e': {  // APPENDS
          const auto items = pop_to_mark(at);
          append(at, top(at), items);
          break;
        }
        case 's': {  // SETITEM
          const auto value = pop(at);
          const auto key = pop(at);
          add_entries(at, top(at), {key, value});
          break;
        }
        case 'u': {  // SETITEMS
          const auto items = pop_to_mark(at);
          add_entries(at, top(at), items);
          break;
        }
        case 'q': put(at, le(1)); break;     // BINPUT
        case 'r': put(at, le(4)); break;     // LONG_BINPUT
        case 0x94: put(at, memo_.size()); break;  // MEMOIZE
        case 'p': put(at, decimal(at, line(at))); break;  // PUT
        case 'h': push(get(at, le(1))); break;   // BINGET
        case 'j': push(get(at, le(4))); break;   // LONG_BINGET
        case 'g': push(get(at, decimal(at, line(at)))); break;  // GET
        case '0':  // POP (with an empty stack it pops a mark, as CPython does)
          if (stack_.size() > (marks_.empty() ? 0 : marks_.back())) {
            stack_.pop_back();
          } else if (!marks_.empty()) {
            marks_.pop_back();
          } else {
            fail(at, "POP on an empty stack");
          }
          break;
        case '1': pop_to_mark(at); break;  // POP_MARK
        case '2': push(top(at)); break;    // DUP
        case 'c': {                        // GLOBAL
          const auto module = line(at);
          const auto name = line(at);
          push(global(at, module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const auto name = pop(at);
          const auto module = pop(at);
          if (node(module).kind != Kind::String || node(name).kind != Kind::String)
            fail(at, "STACK_GLOBAL needs two strings");
          const auto g = global(at, node(module).text, node(name).text);
          push(g);
          break;
        }
        case 'R': {  // REDUCE
          const auto args = pop(at);
          const auto callable = pop(at);
          push(reduce(at, callable, args));
          break;
        }
        case 'b': {  // BUILD: state for the object below it
          const auto state = pop(at);
          const auto object = top(at);
          // An OrderedDict's state is its __dict__ (a state_dict's `_metadata` of module
          // versions): nothing a tensor depends on, so it is dropped.
          if (node(object).kind != Kind::Dict) fail(at, "BUILD on a " + kind_name(node(object).kind));
          (void)state;
          break;
        }
        case 'Q': {  // BINPERSID
          const auto pid = pop(at);
          push(persistent(at, pid));
          break;
        }
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(at, std::string("opcode ") + hex + " is not supported (not a checkpoint written by torch.save?)");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& problem) const {
    throw PickleError("pickle byte " + std::to_string(at) + ": " + problem);
  }

  static std::string kind_name(Kind k) {
    switch (k) {
      case Kind::None: return "None";
      case Kind::Bool: return "bool";
      case Kind::Int: return "int";
      case Kind::Float: return "float";
      case Kind::String: return "string";
      case Kind::Bytes: return "bytes";
      case Kind::Tuple: return "tuple";
      case Kind::List: return "list";
      case Kind::Dict: return "dict";
      case Kind::Storage: return "storage";
      case Kind::Tensor: return "tensor";
      case Kind::Global: return "global";
    }
    return "?";
  }

  const uint8_t* take(uint64_t n) {
    if (n > size_ - pos_) fail(pos_, "the pickle ends early (needs " + std::to_string(n) + " more bytes)");
    const uint8_t* at = p_ + pos_;
    pos_ += n;
    return at;
  }
  uint8_t byte() { return *take(1); }
  uint64_t le(int n) {
    const uint8_t* b = take(static_cast<uint64_t>(n));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[i];
    return v;
  }
  std::string line(size_t at) {
    const void* nl = std::memchr(p_ + pos_, '\n', size_ - pos_);
    if (!nl) fail(at, "a text argument has no end of line");
    const size_t n = static_cast<const uint8_t*>(nl) - (p_ + pos_);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n + 1;
    return s;
  }
  uint64_t decimal(size_t at, const std::string& text) {
    if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
      fail(at, "'" + text + "' is not a memo index");
    return std::stoull(text);
  }
  // Two's complement little-endian of n bytes, as LONG1/LONG4 store it.
  int64_t long_integer(size_t at, uint64_t n) {
    if (n > 8) fail(at, "an integer of " + std::to_string(n) + " bytes does not fit 64 bits");
    if (n == 0) return 0;
    const uint8_t* b = take(n);
    uint64_t v = 0;
    for (int i = static_cast<int>(n) - 1; i >= 0; --i) v = (v << 8) | b[i];
    if (n < 8 && (b[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }

  const PickleNode& node(int32_t i) const { return nodes_[static_cast<size_t>(i)]; }
  int32_t make(Kind kind) {
    if (static_cast<int64_t>(nodes_.size()) >= limits_.max_values)
      fail(pos_, "more than " + std::to_string(limits_.max_values) + " values");
    nodes_.emplace_back();
    nodes_.back().kind = kind;
    return static_cast<int32_t>(nodes_.size() - 1);
  }
  // The stack counts against the same bound as the values: DUP and GET push without making one.
  void push(int32_t i) {
    if (static_cast<int64_t>(stack_.size()) >= limits_.max_values)
      fail(pos_, "a stack of more than " + std::to_string(limits_.max_values) + " entries");
    stack_.push_back(i);
  }
  void push_bool(bool v) {
    const auto n = make(Kind::Bool);
    nodes_[n].integer = v;
    push(n);
  }
  void push_int(int64_t v) {
    const auto n = make(Kind::Int);
    nodes_[n].integer = v;
    push(n);
  }
  void push_float(double v) {
    const auto n = make(Kind::Float);
    nodes_[n].number = v;
    push(n);
  }
  void push_text_int(size_t at, const std::string& text) {
    // Protocol 0 spells True and False as INT 01 / 00.
    if (text == "01" || text == "00") return push_bool(text == "01");
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE)
      fail(at, "INT '" + text + "' is not a 64-bit integer");
    push_int(v);
  }
  void push_text(Kind kind, uint64_t length) {
    if (length > static_cast<uint64_t>(limits_.max_string_bytes))
      fail(pos_, "a string of " + std::to_string(length) + " bytes");
    const uint8_t* b = take(length);
    const auto n = make(kind);
    nodes_[n].text.assign(reinterpret_cast<const char*>(b), length);
    push(n);
  }
  // TUPLE and LIST: the values above the last mark become one node of `kind`.
  void push_marked(size_t at, Kind kind) {
    auto items = pop_to_mark(at);
    const auto node = make(kind);
    nodes_[node].items = std::move(items);
    push(node);
  }
  void push_tuple(size_t at, size_t count) {
    if (stack_.size() < count + (marks_.empty() ? 0 : marks_.back())) fail(at, "TUPLE of more values than the stack has");
    const auto t = make(Kind::Tuple);
    nodes_[t].items.assign(stack_.end() - static_cast<std::ptrdiff_t>(count), stack_.end());
    stack_.resize(stack_.size() - count);
    push(t);
  }
  int32_t pop(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail(at, "stack underflow");
    const auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  int32_t top(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail(at, "stack underflow");
    return stack_.back();
  }
  std::vector<int32_t> pop_to_mark(size_t at) {
    if (marks_.empty()) fail(at, "no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<int32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  void append(size_t at, int32_t list, const std::vector<int32_t>& items) {
    if (node(list).kind != Kind::List) fail(at, "APPEND to a " + kind_name(node(list).kind));
    auto& l = nodes_[static_cast<size_t>(list)].items;
    l.insert(l.end(), items.begin(), items.end());
  }
  void add_entries(size_t at, int32_t dict, const std::vector<int32_t>& items) {
    if (node(dict).kind != Kind::Dict) fail(at, "SETITEM on a " + kind_name(node(dict).kind));
    if (items.size() % 2 != 0) fail(at, "SETITEMS with an odd number of values");
    auto& e = nodes_[static_cast<size_t>(dict)].entries;
    for (size_t i = 0; i < items.size(); i += 2) e.emplace_back(items[i], items[i + 1]);
  }
  void put(size_t at, uint64_t index) {
    if (index >= static_cast<uint64_t>(limits_.max_memo)) fail(at, "memo index " + std::to_string(index));
    memo_[index] = top(at);
  }
  int32_t get(size_t at, uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail(at, "memo index " + std::to_string(index) + " was never stored");
    return it->second;
  }

  int32_t global(size_t at, const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    bool allowed = full == "collections.OrderedDict" || full == "torch._utils._rebuild_tensor_v2" ||
                   full == "torch._utils._rebuild_parameter";
    std::string dtype;
    if (module == "torch")
      for (const auto& s : kStorageTypes)
        if (name == s.name) {
          allowed = true;
          dtype = s.dtype;
        }
    if (!allowed) {
      // Printable and short: the name comes from the file.
      std::string shown;
      for (const char c : full.substr(0, 120)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
      fail(at, "refers to '" + shown +
                   "', which is not a tensor or a container: only tensors, dicts, lists, numbers and strings "
                   "are read (no code from a checkpoint is ever run)");
    }
    const auto g = make(Kind::Global);
    nodes_[g].text = full;
    nodes_[g].dtype = dtype;
    return g;
  }

  std::vector<int64_t> int_tuple(size_t at, int32_t t, const char* what) {
    if (node(t).kind != Kind::Tuple && node(t).kind != Kind::List) fail(at, std::string(what) + " is not a tuple");
    std::vector<int64_t> out;
    for (const auto i : node(t).items) {
      if (node(i).kind != Kind::Int) fail(at, std::string(what) + " holds a " + kind_name(node(i).kind));
      out.push_back(node(i).integer);
    }
    return out;
  }

  int32_t reduce(size_t at, int32_t callable, int32_t args) {
    if (node(callable).kind != Kind::Global) fail(at, "REDUCE of a " + kind_name(node(callable).kind));
    if (node(args).kind != Kind::Tuple) fail(at, "REDUCE arguments are not a tuple");
    const std::string f = node(callable).text;
    const auto a = node(args).items;  // a copy: make() below may move the nodes
    if (f == "collections.OrderedDict") {
      if (!a.empty()) fail(at, "OrderedDict with arguments");
      return make(Kind::Dict);
    }
    if (f == "torch._utils._rebuild_parameter") {
      if (a.size() < 1 || node(a[0]).kind != Kind::Tensor) fail(at, "_rebuild_parameter without a tensor");
      return a[0];
    }
    if (f == "torch._utils._rebuild_tensor_v2") {
      // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
      if (a.size() < 4) fail(at, "_rebuild_tensor_v2 with " + std::to_string(a.size()) + " arguments");
      if (node(a[0]).kind != Kind::Storage) fail(at, "_rebuild_tensor_v2 without a storage");
      if (node(a[1]).kind != Kind::Int) fail(at, "_rebuild_tensor_v2: storage offset is not an int");
      auto sizes = int_tuple(at, a[2], "tensor size");
      auto strides = int_tuple(at, a[3], "tensor stride");
      if (sizes.size() != strides.size()) fail(at, "tensor size and stride of different lengths");
      const auto t = make(Kind::Tensor);
      auto& n = nodes_[static_cast<size_t>(t)];
      n.text = node(a[0]).text;
      n.dtype = node(a[0]).dtype;
      n.integer = node(a[0]).integer;  // the storage's element count
      n.storage_offset = node(a[1]).integer;
      n.sizes = std::move(sizes);
      n.strides = std::move(strides);
      return t;
    }
    fail(at, "REDUCE of " + f + " (a storage type cannot be called)");
  }

  // torch.save's persistent id of a storage: ('storage', storage_type, key, location, numel).
  int32_t persistent(size_t at, int32_t pid) {
    if (node(pid).kind != Kind::Tuple) fail(at, "persistent id is not a tuple");
    const auto a = node(pid).items;
    if (a.size() != 5 || node(a[0]).kind != Kind::String || node(a[0]).text != "storage")
      fail(at, "persistent id is not a storage reference");
    if (node(a[1]).kind != Kind::Global || node(a[1]).dtype.empty()) fail(at, "storage of an unknown type");
    if (node(a[2]).kind != Kind::String) fail(at, "storage key is not a string");
    if (node(a[4]).kind != Kind::Int || node(a[4]).integer < 0) fail(at, "storage size is not a count");
    const auto s = make(Kind::Storage);
    auto& n = nodes_[static_cast<size_t>(s)];
    n.dtype = node(a[1]).dtype;
    n.text = node(a[2]).text;
    n.integer = node(a[4]).integer;
    return s;
  }

  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  PickleLimits limits_;
  std::vector<PickleNode> nodes_;
  std::vector<int32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, int32_t> memo_;
};

}  // namespace

PickleValues read_pickle(const uint8_t* bytes, size_t size, const PickleLimits& limits) {
  return Machine(bytes, size, limits).run();
}

int64_t storage_element_size(const std::string& dtype) {
  for (const auto& s : kStorageTypes)
    if (dtype == s.dtype) return s.element_size;
  return 0;
}

}  // namespace mumoe::io
