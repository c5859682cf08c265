// The safetensors reader/writer: round trips, one test per malformed-file case, atomic writes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>

#include "io/errors.h"
#include "io/safetensors.h"
#include "temp_dir.h"

using namespace mumoe;
using mumoe::testkit::read_bytes;
using mumoe::testkit::TempDir;
using mumoe::testkit::write_bytes;

namespace {

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A file with the given header text and `data_bytes` zero bytes of data.
std::string raw_file(const std::string& header, size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\0');
}

// Expects open() (or read() of `tensor`) to throw a FileError naming the path and `phrase`.
void expect_rejected(const std::string& path, const std::string& phrase, const std::string& tensor = "") {
  try {
    auto f = io::SafetensorsFile::open(path);
    if (!tensor.empty()) f.read(tensor);
    FAIL() << "no error for a file that should fail with '" << phrase << "'";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(Safetensors, RoundTripsEveryWritableDtypeAndMetadata) {
  TempDir dir;
  const auto path = dir.file("round.safetensors");
  torch::manual_seed(0);
  std::vector<io::NamedTensor> tensors = {
      {"f32", torch::randn({3, 4})},
      {"f64", torch::randn({2, 2, 2}, torch::kFloat64)},
      {"f16", torch::randn({5}).to(torch::kFloat16)},
      {"bf16", torch::randn({4, 1}).to(torch::kBFloat16)},
      {"i64", torch::tensor({int64_t{7}, int64_t{-3}})},
      {"scalar", torch::tensor(2.5)},
      {"empty", torch::zeros({0, 3})},
      {"strided", torch::randn({4, 6}).t()},  // non-contiguous input
  };
  io::write_safetensors(path, tensors, {{"note", "héllo"}, {"k", "v"}});
  auto f = io::SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata().at("note"), "héllo");
  EXPECT_EQ(f.entries().size(), tensors.size());
  for (const auto& t : tensors) {
    auto back = f.read(t.name);
    EXPECT_EQ(back.scalar_type(), t.tensor.scalar_type()) << t.name;
    EXPECT_TRUE(torch::equal(back, t.tensor)) << t.name;
  }
  // The data area starts 8-byte aligned, as the reference writer does.
  const auto bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST(Safetensors, ReadsAFileWrittenByHand) {
  // Independent of our writer: header and little-endian float bytes spelled out here.
  TempDir dir;
  const auto path = dir.file("hand.safetensors");
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string data("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);  // 1.0f, -2.0f
  write_bytes(path, le64(header.size()) + header + data);
  auto x = io::SafetensorsFile::open(path).read("x");
  EXPECT_EQ(x[0].item<float>(), 1.0f);
  EXPECT_EQ(x[1].item<float>(), -2.0f);
}

struct Malformed {
  std::string name;
  std::string bytes;
  std::string phrase;
  std::string tensor;  // read this tensor after opening (for errors detected on read)
};

std::vector<Malformed> malformed_cases() {
  const std::string ok = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  return {
      {"missing_file", "", "does not exist", ""},
      {"empty_file", "", "shorter than the 8-byte header length", ""},
      {"short_file", "abc", "shorter than the 8-byte header length", ""},
      {"header_longer_than_file", le64(1000) + "{}", "does not fit", ""},
      {"huge_header_length", le64(~0ull) + "{}", "does not fit", ""},
      // Within the file, but over the cap: the message says so instead of "does not fit".
      {"header_over_the_cap", le64(100ull * 1024 * 1024 + 1) + std::string(100 * 1024 * 1024 + 1, ' '),
       "more than the 104857600-byte limit", ""},
      {"header_not_json", raw_file("{not json", 0), "not valid JSON", ""},
      {"header_not_object", raw_file("[1,2]", 0), "not a JSON object", ""},
      {"entry_without_dtype", raw_file(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 4), "needs dtype", ""},
      {"unknown_dtype", raw_file(R"({"t":{"dtype":"F7","shape":[1],"data_offsets":[0,4]}})", 4), "unknown dtype 'F7'", ""},
      {"negative_shape", raw_file(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "non-negative", ""},
      {"shape_not_list", raw_file(R"({"t":{"dtype":"F32","shape":3,"data_offsets":[0,4]}})", 4), "shape is not a list", ""},
      {"offsets_outside_data", raw_file("{" + ok + "}", 4), "outside", ""},
      {"offsets_reversed", raw_file(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8), "are reversed", ""},
      {"offsets_negative", raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 8), "two non-negative integers", ""},
      {"byte_length_mismatch", raw_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12", ""},
      // 2^40 × 2^40 × 4 bytes wraps around 64 bits (to 0): the message must not say "needs 0".
      {"shape_overflowing_64_bits",
       raw_file(R"({"t":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})", 8),
       "more than any file can hold", ""},
      {"escape_sequence_in_name",
       raw_file(R"({"\u001b]0;owned\u0007":{"dtype":"F7","shape":[1],"data_offsets":[0,4]}})", 4),
       "tensor '\\x1b]0;owned\\x07': unknown dtype", ""},
      {"overlapping_tensors",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
       "overlap", ""},
      {"metadata_not_strings", raw_file(R"({"__metadata__":{"k":1},)" + ok + "}", 8), "not a string", ""},
      {"unsupported_dtype_on_read", raw_file(R"({"t":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 8), "dtype I32", "t"},
      {"missing_tensor_on_read", raw_file("{" + ok + "}", 8), "no tensor named 'u'", "u"},
  };
}

void PrintTo(const Malformed& m, std::ostream* os) { *os << m.name; }

class MalformedFile : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedFile, IsRejectedWithAClearMessage) {
  TempDir dir;
  const auto path = dir.file(GetParam().name + ".safetensors");
  if (GetParam().name != "missing_file") write_bytes(path, GetParam().bytes);
  expect_rejected(path, GetParam().phrase, GetParam().tensor);
}

INSTANTIATE_TEST_SUITE_P(Cases, MalformedFile, ::testing::ValuesIn(malformed_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Safetensors, AFifoIsRejectedWithoutBlocking) {
  TempDir dir;
  const auto path = dir.file("fifo.safetensors");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_rejected(path, "is a FIFO (named pipe), not a regular file");  // would block forever if opened
}

TEST(Safetensors, ADirectoryIsRejectedByName) {
  TempDir dir;
  expect_rejected(dir.path().string(), "is a directory");
}

TEST(Safetensors, TruncatedCopyOfAValidFileIsRejected) {
  TempDir dir;
  const auto path = dir.file("full.safetensors");
  io::write_safetensors(path, {{"a", torch::randn({64})}, {"b", torch::randn({64})}});
  const auto bytes = read_bytes(path);
  for (size_t keep : {size_t{4}, size_t{20}, bytes.size() / 2, bytes.size() - 1}) {
    const auto cut = dir.file("cut.safetensors");
    write_bytes(cut, bytes.substr(0, keep));
    EXPECT_THROW(io::SafetensorsFile::open(cut), FileError) << "kept " << keep << " bytes";
  }
}

TEST(Safetensors, WriterRejectsUnsupportedDtypesAndDuplicateNames) {
  TempDir dir;
  EXPECT_THROW(io::write_safetensors(dir.file("x"), {{"t", torch::zeros({2}, torch::kInt32)}}), UsageError);
  EXPECT_THROW(io::write_safetensors(dir.file("x"), {{"t", torch::zeros({2})}, {"t", torch::zeros({2})}}), UsageError);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x")));
}

TEST(Safetensors, FailedOrCancelledWriteLeavesTheOriginalIntact) {
  TempDir dir;
  const auto path = dir.file("model.safetensors");
  io::write_safetensors(path, {{"old", torch::ones({4})}});
  const auto before = read_bytes(path);
  const std::vector<io::NamedTensor> big = {{"new", torch::randn({3 << 20})}};  // 12 MB, several chunks

  // A progress callback that cancels half-way.
  EXPECT_THROW(io::write_safetensors(path, big, {}, [](uint64_t done, uint64_t total) { return done < total / 2; }),
               Cancelled);
  EXPECT_EQ(read_bytes(path), before);
  // A failure thrown from inside the write (stands in for a full disk or a crash of the caller).
  EXPECT_THROW(io::write_safetensors(path, big, {},
                                     [](uint64_t done, uint64_t) -> bool { throw std::runtime_error("disk full"); }),
               std::runtime_error);
  EXPECT_EQ(read_bytes(path), before);
  // No temporary file is left behind.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "model.safetensors");
  }
  EXPECT_EQ(files, 1u);
  // And a write into a directory that does not exist fails cleanly, naming the file.
  try {
    io::write_safetensors(dir.file("no/such/dir/m.safetensors"), big);
    FAIL();
  } catch (const WriteError& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir/m.safetensors"), std::string::npos);
  }
}

TEST(Safetensors, RealWriteFailureFromTheKernelLeavesTheOriginalIntact) {
  // RLIMIT_FSIZE makes write(2) fail with EFBIG past the limit: a genuine I/O error from the
  // kernel, standing in for a full disk, without needing privileges or filling a disk.
  TempDir dir;
  const auto path = dir.file("m.safetensors");
  io::write_safetensors(path, {{"old", torch::ones({4})}});
  const auto before = read_bytes(path);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message;
  try {
    io::write_safetensors(path, {{"new", torch::randn({1 << 20})}});
  } catch (const WriteError& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("write failed"), std::string::npos) << message;
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

}  // namespace
