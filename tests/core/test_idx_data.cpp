// IDX / Fashion-MNIST-style readers on tiny fixtures the test writes (raw and gzipped), and each
// bad-data case: missing file, wrong magic, unsupported type, truncated data, count mismatch.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/idx_file.h"
#include "data/image_data.h"
#include "io/errors.h"
#include "expect_file_error.h"
#include "temp_dir.h"

using namespace mumoe;
using testkit::TempDir;

namespace {

std::string be32(uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
}

std::string idx_bytes(const std::vector<uint32_t>& shape, const std::string& values) {
  std::string out{'\0', '\0', '\x08', static_cast<char>(shape.size())};
  for (auto d : shape) out += be32(d);
  return out + values;
}

std::string gzip(const std::string& raw) {
  z_stream s{};
  deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(raw.size() + 1024, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  s.avail_in = static_cast<uInt>(raw.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  deflate(&s, Z_FINISH);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

// 3 images of 2×2 with values 0..11 and labels 2, 0, 1.
void write_split(const TempDir& dir, const std::string& stem, bool gzipped) {
  std::string pixels;
  for (int i = 0; i < 12; ++i) pixels += static_cast<char>(i * 20);
  auto images = idx_bytes({3, 2, 2}, pixels);
  auto labels = idx_bytes({3}, std::string("\x02\x00\x01", 3));
  const std::string ext = gzipped ? ".gz" : "";
  testkit::write_bytes(dir.file(stem + "-images-idx3-ubyte" + ext), gzipped ? gzip(images) : images);
  testkit::write_bytes(dir.file(stem + "-labels-idx1-ubyte" + ext), gzipped ? gzip(labels) : labels);
}

using testkit::expect_file_error;

TEST(IdxData, ReadsRawAndGzippedSplits) {
  for (bool gz : {false, true}) {
    TempDir dir;
    write_split(dir, "t10k", gz);
    auto d = data::load_image_data("idx:" + dir.path().string() + ":test");
    ASSERT_EQ(d.images.sizes(), (std::vector<int64_t>{3, 1, 2, 2}));
    EXPECT_EQ(d.images[1][0][1][0].item<int>(), 6 * 20);
    EXPECT_TRUE(torch::equal(d.labels, torch::tensor({2, 0, 1}, torch::kLong)));
    EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1", "2"}));
    EXPECT_NEAR(data::to_float_images(d.images)[2][0][1][1].item<float>(), 220 / 255.0, 1e-6);
  }
}

TEST(IdxData, MissingFileIsNamed) {
  TempDir dir;
  expect_file_error([&] { data::load_image_data("idx:" + dir.path().string() + ":train"); },
                    "train-images-idx3-ubyte", "missing");
}

TEST(IdxData, WrongMagicIsRejected) {
  TempDir dir;
  testkit::write_bytes(dir.file("x.idx"), "\x01\x02\x08\x01" + be32(0));
  expect_file_error([&] { data::read_idx(dir.file("x.idx")); }, "x.idx", "wrong magic");
}

TEST(IdxData, UnsupportedElementTypeIsRejected) {
  TempDir dir;
  testkit::write_bytes(dir.file("f.idx"), std::string("\0\0\x0d\x01", 4) + be32(1) + "abcd");
  expect_file_error([&] { data::read_idx(dir.file("f.idx")); }, "f.idx", "not supported");
}

TEST(IdxData, TruncatedDataIsRejected) {
  TempDir dir;
  testkit::write_bytes(dir.file("t.idx"), idx_bytes({2, 2, 2}, "abc"));
  expect_file_error([&] { data::read_idx(dir.file("t.idx")); }, "t.idx", "announces 8 values but the file holds 3");
  testkit::write_bytes(dir.file("t.gz"), gzip(idx_bytes({2, 2, 2}, "abcdefgh")).substr(0, 20));
  expect_file_error([&] { data::read_idx(dir.file("t.gz")); }, "t.gz", "gzip");
}

TEST(IdxData, CountMismatchBetweenImagesAndLabelsNamesBothFiles) {
  TempDir dir;
  testkit::write_bytes(dir.file("i"), idx_bytes({3, 1, 1}, "abc"));
  testkit::write_bytes(dir.file("l"), idx_bytes({2}, std::string("\0\1", 2)));
  try {
    data::load_idx_pair(dir.file("i"), dir.file("l"), {}, "test");
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("3 images but"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.file("l")), std::string::npos) << e.what();
  }
}

// A decompression bomb: a valid header announcing 8 values, then 64 MiB of zeros that gzip
// squeezes into about 64 kilobytes. The reader stops right after the announced size.
TEST(IdxData, GzipBombStopsAtTheAnnouncedSize) {
  TempDir dir;
  const std::string bomb = gzip(idx_bytes({2, 2, 2}, std::string(64u << 20, '\0')));
  ASSERT_LT(bomb.size(), 1u << 20);
  testkit::write_bytes(dir.file("bomb.gz"), bomb);
  expect_file_error([&] { data::read_idx(dir.file("bomb.gz")); }, "bomb.gz", "decompression bomb");
  // A header whose product of dimensions overflows 64 bits.
  testkit::write_bytes(dir.file("huge.idx"), idx_bytes({0xffffffffu, 0xffffffffu, 0xffffffffu}, "abc"));
  expect_file_error([&] { data::read_idx(dir.file("huge.idx")); }, "huge.idx", "-byte limit");
}

TEST(IdxData, EmptySplitsAndLabelsBeyondTheClassNamesAreBadData) {
  TempDir dir;
  testkit::write_bytes(dir.file("i"), idx_bytes({0, 1, 1}, ""));
  testkit::write_bytes(dir.file("l"), idx_bytes({0}, ""));
  expect_file_error([&] { data::load_idx_pair(dir.file("i"), dir.file("l"), {}, "t"); }, dir.file("l"), "holds no samples");
  testkit::write_bytes(dir.file("i"), idx_bytes({2, 1, 1}, "ab"));
  testkit::write_bytes(dir.file("l"), idx_bytes({2}, std::string("\x00\xc8", 2)));  // label 200
  expect_file_error([&] { data::load_idx_pair(dir.file("i"), dir.file("l"), {"a", "b"}, "t"); }, dir.file("l"),
                    "label 200 but only 2 class names");
}

TEST(IdxData, AFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  expect_file_error([&] { data::read_idx(dir.file("fifo")); }, "fifo", "FIFO");
}

TEST(IdxData, UnknownSpecIsAUsageError) {
  EXPECT_THROW(data::load_image_data("cifar:test"), UsageError);
  EXPECT_THROW(data::load_image_data("fashion-mnist:validation"), UsageError);
}

}  // namespace
