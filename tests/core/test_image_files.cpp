// ImageFolder and CelebA readers on small fixtures the test writes with OpenCV, and each bad-data
// case: unreadable image, empty folder, size mismatch, attribute file with the wrong column
// count or a bad value, an image missing from the attribute file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <opencv2/imgcodecs.hpp>
#include <zlib.h>

#include <unistd.h>

#include <filesystem>
#include <tuple>

#include "data/dataset.h"
#include "data/image_data.h"
#include "data/image_files.h"
#include "io/errors.h"
#include "io/image_header.h"
#include "expect_file_error.h"
#include "temp_dir.h"

using namespace mumoe;
using testkit::TempDir;
namespace fs = std::filesystem;

namespace {

// A w×h BGR image whose pixel (x, y) is (x, y, value).
void write_image(const std::string& path, int w, int h, int value) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(x, y, value);
  ASSERT_TRUE(cv::imwrite(path, m));
}

using testkit::expect_file_error;

TEST(ImageFolder, ReadsClassesInNameOrderWithRGBPixels) {
  TempDir dir;
  for (const char* c : {"zebra", "cat"}) fs::create_directory(dir.path() / c);
  write_image(dir.file("cat/b.png"), 4, 3, 10);
  write_image(dir.file("cat/a.png"), 4, 3, 20);
  write_image(dir.file("zebra/x.png"), 4, 3, 30);
  testkit::write_bytes(dir.file("zebra/notes.txt"), "not an image");  // ignored: not an image extension
  auto d = data::load_image_data("folder:" + dir.path().string());
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "zebra"}));
  EXPECT_TRUE(torch::equal(d.labels, torch::tensor({0, 0, 1}, torch::kLong)));
  ASSERT_EQ(d.images.sizes(), (std::vector<int64_t>{3, 3, 3, 4}));
  // File order a.png, b.png; BGR (x, y, value) becomes RGB (value, y, x).
  EXPECT_EQ(d.images[0][0][1][2].item<int>(), 20);
  EXPECT_EQ(d.images[0][1][1][2].item<int>(), 1);
  EXPECT_EQ(d.images[0][2][1][2].item<int>(), 2);
  auto grey = data::load_image_folder(dir.path().string(), {1, 8});
  EXPECT_EQ(grey.images.sizes(), (std::vector<int64_t>{3, 1, 8, 8}));
}

TEST(ImageFolder, BadDataIsNamed) {
  TempDir dir;
  expect_file_error([&] { data::load_image_folder(dir.path().string()); }, dir.path().string(), "no class sub-folders");
  fs::create_directory(dir.path() / "a");
  expect_file_error([&] { data::load_image_folder(dir.path().string()); }, dir.path().string(), "no images");
  write_image(dir.file("a/1.png"), 4, 4, 0);
  testkit::write_bytes(dir.file("a/2.png"), "\x89PNG garbage");
  expect_file_error([&] { data::load_image_folder(dir.path().string()); }, "a/2.png", "cannot decode");
  fs::remove(dir.file("a/2.png"));
  write_image(dir.file("a/3.png"), 5, 4, 0);
  expect_file_error([&] { data::load_image_folder(dir.path().string()); }, "a/3.png", "5×4 but the first image is 4×4");
}


// folder: and celeba: stream: opening lists and checks the files and decodes only the first
// image; every other image is decoded when asked for, at its own size, and a bad one is named
// then — not at open, which would read the whole set.
TEST(StreamedImageFolder, OpensWithoutDecodingAndReadsEachImageOnDemand) {
  TempDir dir;
  for (const char* c : {"b", "a"}) fs::create_directory(dir.path() / c);
  write_image(dir.file("a/1.png"), 4, 3, 10);
  write_image(dir.file("a/2.png"), 7, 5, 20);
  write_image(dir.file("b/1.png"), 6, 6, 30);
  const auto d = data::load_dataset("folder:" + dir.path().string());
  ASSERT_TRUE(d.streams_images());
  EXPECT_FALSE(d.images.defined());
  EXPECT_EQ(d.size(), 3);
  EXPECT_EQ(d.image_channels(), 3);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(torch::equal(d.labels, torch::tensor({0, 0, 1}, torch::kLong)));
  // Each at its stored size, RGB: BGR (x, y, value) → (value, y, x).
  ASSERT_EQ(d.image(1).sizes(), (std::vector<int64_t>{3, 5, 7}));
  EXPECT_EQ(d.image(1)[0][4][6].item<int>(), 20);
  EXPECT_EQ(d.image(1)[1][4][6].item<int>(), 4);
  EXPECT_EQ(d.image(1)[2][4][6].item<int>(), 6);
  ASSERT_EQ(d.image(0).sizes(), (std::vector<int64_t>{3, 3, 4}));
  EXPECT_EQ(d.image(0)[0][2][3].item<int>(), 10);
  // Decoding a batch in parallel keeps the order of the indices asked for.
  const auto sizes = data::decode_images(*d.image_stream, torch::tensor({2, 0, 1}, torch::kLong),
                                         [](const torch::Tensor& image, int64_t) {
                                           return torch::tensor({image.size(1), image.size(2)}, torch::kLong);
                                         });
  EXPECT_TRUE(torch::equal(sizes, torch::tensor({6, 6, 3, 4, 5, 7}, torch::kLong).view({3, 2})));
  // All in memory needs one size; the first image of another size is named.
  expect_file_error([&] { data::with_images_in_memory(d); }, "a/2.png", "7×5 but the first image is 4×3");
  // A corrupt file is found when it is read, and named.
  testkit::write_bytes(dir.file("b/1.png"), "\x89PNG garbage");
  const auto reopened = data::load_dataset("folder:" + dir.path().string());
  expect_file_error([&] { reopened.image(2); }, "b/1.png", "cannot decode");
  expect_file_error([&] { data::decode_images(*reopened.image_stream, torch::arange(3),
                                              [](const torch::Tensor& i, int64_t) { return i.sum(); }); },
                    "b/1.png", "cannot decode");
}

TEST(StreamedImageFolder, TheFingerprintFollowsTheFiles) {
  TempDir dir;
  fs::create_directory(dir.path() / "a");
  write_image(dir.file("a/1.png"), 4, 4, 10);
  write_image(dir.file("a/2.png"), 4, 4, 20);
  const auto spec = "folder:" + dir.path().string();
  const auto before = data::load_dataset(spec).image_stream->fingerprint();
  EXPECT_EQ(data::load_dataset(spec).image_stream->fingerprint(), before);
  write_image(dir.file("a/2.png"), 5, 4, 20);  // another size: another file length
  EXPECT_NE(data::load_dataset(spec).image_stream->fingerprint(), before);
  const auto two = data::load_dataset(spec).image_stream->fingerprint();
  write_image(dir.file("a/3.png"), 4, 4, 30);
  EXPECT_NE(data::load_dataset(spec).image_stream->fingerprint(), two);
}

TEST(StreamedImageFolder, AnUnreadableFirstImageIsNamedAtOpen) {
  TempDir dir;
  fs::create_directory(dir.path() / "a");
  testkit::write_bytes(dir.file("a/1.png"), "not a png");
  expect_file_error([&] { data::load_dataset("folder:" + dir.path().string()); }, "a/1.png", "cannot decode");
}

class CelebA : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(dir_.path() / "img_align_celeba");
    for (int i = 1; i <= 3; ++i) write_image(dir_.file("img_align_celeba/00000" + std::to_string(i) + ".jpg"), 6, 6, i);
    testkit::write_bytes(dir_.file("list_attr_celeba.txt"),
                         "3\nYoung Male Blond_Hair\n000001.jpg  1 -1 -1\n000002.jpg -1  1  1\n000003.jpg  1  1 -1\n");
    testkit::write_bytes(dir_.file("list_eval_partition.txt"), "000001.jpg 0\n000002.jpg 2\n000003.jpg 0\n");
  }
  TempDir dir_;
};

TEST_F(CelebA, ReadsASplitWithItsAttributes) {
  auto train = data::load_image_data("celeba:" + dir_.path().string() + ":train");
  EXPECT_EQ(train.size(), 2);
  EXPECT_EQ(train.attribute_names, (std::vector<std::string>{"Young", "Male", "Blond_Hair"}));
  EXPECT_TRUE(torch::equal(train.attributes, torch::tensor({1, 0, 0, 1, 1, 0}, torch::kLong).view({2, 3})));
  auto test = data::load_celeba(dir_.path().string(), "test");
  EXPECT_EQ(test.size(), 1);
  EXPECT_TRUE(torch::equal(test.attributes, torch::tensor({0, 1, 1}, torch::kLong).view({1, 3})));
  EXPECT_EQ(test.images.sizes(), (std::vector<int64_t>{1, 3, 6, 6}));
}

TEST_F(CelebA, WrongColumnCountIsNamedWithItsLine) {
  testkit::write_bytes(dir_.file("list_attr_celeba.txt"), "2\nYoung Male\n000001.jpg 1 -1\n000002.jpg 1\n");
  expect_file_error([&] { data::load_celeba(dir_.path().string(), "train"); }, "list_attr_celeba.txt",
               "line 4 has 2 columns");
}

TEST_F(CelebA, ValuesOtherThanPlusMinusOneAreRejected) {
  testkit::write_bytes(dir_.file("list_attr_celeba.txt"), "1\nYoung\n000001.jpg 0\n");
  expect_file_error([&] { data::load_celeba(dir_.path().string(), "train"); }, "list_attr_celeba.txt", "is not 1 or -1");
}

TEST_F(CelebA, ImageMissingFromTheAttributeFile) {
  testkit::write_bytes(dir_.file("list_eval_partition.txt"), "000009.jpg 0\n");
  expect_file_error([&] { data::load_celeba(dir_.path().string(), "train"); }, "list_eval_partition.txt",
               "000009.jpg is not in");
}

TEST_F(CelebA, AnEmptySplitIsBadData) {
  testkit::write_bytes(dir_.file("list_eval_partition.txt"), "000001.jpg 0\n000002.jpg 0\n000003.jpg 0\n");
  expect_file_error([&] { data::load_celeba(dir_.path().string(), "valid"); }, "list_eval_partition.txt",
                    "lists no image of the 'valid' split");
}

// Image headers are read before decoding (io/image_header.h), issue 45: a PNG or JPEG claiming
// 20000 × 20000 pixels used to be decoded (10.5 GB), one of 60000 × 60000 came out as OpenCV's
// assertion, and a 1 × 5000 strip grew to gigabytes once its short side was scaled up. Each is now
// refused by name before the decoder allocates anything.
std::string big_endian32(uint32_t n) {
  return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                     static_cast<char>(n)};
}

std::string png_claiming(uint32_t width, uint32_t height) {
  std::string ihdr = "IHDR" + big_endian32(width) + big_endian32(height) + std::string("\x08\x02\x00\x00\x00", 5);
  const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(ihdr.data()), static_cast<uInt>(ihdr.size()));
  std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + big_endian32(13) + ihdr + big_endian32(crc);
  std::string idat = "IDAT" + std::string(64, '\0');
  return png + big_endian32(64) + idat +
         big_endian32(crc32(0, reinterpret_cast<const Bytef*>(idat.data()), static_cast<uInt>(idat.size())));
}

// A JPEG's start: SOI, an APP0 segment, then a baseline frame header (SOF0) with the size.
std::string jpeg_claiming(uint16_t width, uint16_t height) {
  auto be16 = [](uint16_t n) { return std::string{static_cast<char>(n >> 8), static_cast<char>(n)}; };
  return std::string("\xFF\xD8\xFF\xE0", 4) + be16(16) + std::string("JFIF\0\x01\x01\0\0\x01\0\x01\0\0", 14) +
         std::string("\xFF\xC0", 2) + be16(17) + std::string("\x08", 1) + be16(height) + be16(width) +
         std::string("\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01", 10) + std::string("\xFF\xD9", 2);
}

TEST(ImageHeaders, SizesAreReadFromPngJpegAndBmpHeaders) {
  const auto png = png_claiming(640, 480);
  auto size = io::parse_image_header(reinterpret_cast<const unsigned char*>(png.data()), png.size());
  ASSERT_TRUE(size);
  EXPECT_EQ(size->width, 640);
  EXPECT_EQ(size->height, 480);
  const auto jpeg = jpeg_claiming(1920, 1080);
  size = io::parse_image_header(reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size());
  ASSERT_TRUE(size);
  EXPECT_EQ(size->width, 1920);
  EXPECT_EQ(size->height, 1080);
  // Files OpenCV writes, read back by the header alone.
  TempDir dir;
  for (const auto* ext : {".png", ".jpg", ".bmp"}) {
    const auto path = dir.file(std::string("real") + ext);
    write_image(path, 37, 21, 5);
    const auto real = io::check_image_header(path);
    ASSERT_TRUE(real) << ext;
    EXPECT_EQ(real->width, 37) << ext;
    EXPECT_EQ(real->height, 21) << ext;
  }
  EXPECT_FALSE(io::parse_image_header(reinterpret_cast<const unsigned char*>("GIF89a"), 6));
  EXPECT_FALSE(io::parse_image_header(reinterpret_cast<const unsigned char*>(png.data()), 20));  // cut short
}

TEST(ImageFolder, HostileHeadersAreRefusedByNameBeforeDecoding) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"huge.png", png_claiming(60000, 60000), "pixel limit"},
      {"big.png", png_claiming(20000, 20000), "pixel limit"},
      {"big.jpg", jpeg_claiming(20000, 20000), "pixel limit"},
      {"strip.png", png_claiming(1, 5000), "times as long as it is wide"},
      {"wide.png", png_claiming(20000, 1), "times as long as it is wide"},
      {"empty.png", png_claiming(0, 10), "says it is 0×10 pixels"},
  };
  for (const auto& [name, bytes, phrase] : cases) {
    TempDir dir;
    fs::create_directory(dir.path() / "a");
    testkit::write_bytes(dir.file("a/" + name), bytes);
    expect_file_error([&] { data::load_image_folder(dir.path().string()); }, name, phrase);
    expect_file_error([&] { data::open_image_folder(dir.path().string()); }, name, phrase);
  }
}

TEST(ImageFolder, AnUnreadableImageSaysSoInsteadOfCorrupt) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their permissions";
  TempDir dir;
  fs::create_directory(dir.path() / "a");
  write_image(dir.file("a/1.png"), 4, 4, 0);
  fs::permissions(dir.file("a/1.png"), fs::perms::none);
  expect_file_error([&] { data::load_image_folder(dir.path().string()); }, "1.png", "Permission denied");
}

TEST_F(CelebA, StreamsTheSplitWithItsAttributes) {
  const auto d = data::load_dataset("celeba:" + dir_.path().string() + ":train");
  ASSERT_TRUE(d.streams_images());
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.attribute_names, (std::vector<std::string>{"Young", "Male", "Blond_Hair"}));
  EXPECT_TRUE(torch::equal(d.attributes, torch::tensor({1, 0, 0, 1, 1, 0}, torch::kLong).view({2, 3})));
  EXPECT_TRUE(torch::equal(data::with_images_in_memory(d).images,
                           data::load_celeba(dir_.path().string(), "train").images));
}

TEST_F(CelebA, UnreadableImage) {
  testkit::write_bytes(dir_.file("img_align_celeba/000003.jpg"), "not a jpeg");
  expect_file_error([&] { data::load_celeba(dir_.path().string(), "train"); }, "000003.jpg", "cannot decode");
}

}  // namespace
