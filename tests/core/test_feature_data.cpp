// Feature files (features/labels/attributes + names): a good file, and each bad-data case.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/feature_data.h"
#include "io/errors.h"
#include "io/safetensors.h"
#include "temp_dir.h"

using namespace mumoe;

namespace {

std::string write(const testkit::TempDir& dir, const std::vector<io::NamedTensor>& t,
                  const std::map<std::string, std::string>& meta = {}) {
  const auto path = dir.file("f.safetensors");
  io::write_safetensors(path, t, meta);
  return path;
}

void expect_error(const std::string& path, const std::string& phrase) {
  try {
    data::load_feature_file(path);
    FAIL() << "expected " << phrase;
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(FeatureFile, ReadsFeaturesLabelsAttributesAndNames) {
  testkit::TempDir dir;
  auto f = torch::randn({4, 3}, torch::kFloat64);
  const auto path = write(dir,
                          {{"features", f},
                           {"labels", torch::tensor({0.0, 2.0, 1.0, 2.0})},
                           {"attributes", torch::tensor({1, 0, 0, 1, 1, 1, 0, 0}, torch::kLong).view({4, 2})}},
                          {{"mumoe.class_names", R"(["a","b","c"])"}, {"mumoe.attribute_names", R"(["Young","Male"])"}});
  auto d = data::load_feature_file(path);
  EXPECT_TRUE(torch::allclose(d.features, f.to(torch::kFloat32)));
  EXPECT_TRUE(torch::equal(d.labels, torch::tensor({0, 2, 1, 2}, torch::kLong)));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(d.attribute_names, (std::vector<std::string>{"Young", "Male"}));
  EXPECT_EQ(d.attributes[1][1].item<int64_t>(), 1);
}

TEST(FeatureFile, BadFilesAreNamed) {
  testkit::TempDir dir;
  auto f = torch::randn({3, 2});
  auto labels = torch::tensor({0, 1, 1}, torch::kLong);
  expect_error(write(dir, {{"features", f}}), "no tensor named 'labels'");
  expect_error(write(dir, {{"features", torch::randn({3})}, {"labels", labels}}), "'features' must be a float tensor");
  auto nan = f.clone();
  nan[0][0] = std::numeric_limits<float>::quiet_NaN();
  expect_error(write(dir, {{"features", nan}, {"labels", labels}}), "NaN");
  expect_error(write(dir, {{"features", f}, {"labels", torch::tensor({0, 1}, torch::kLong)}}), "must be [3]");
  expect_error(write(dir, {{"features", f}, {"labels", torch::tensor({0.5, 1.0, 1.0})}}), "whole class indices");
  expect_error(write(dir, {{"features", f}, {"labels", torch::tensor({0, -1, 1}, torch::kLong)}}), "negative");
  expect_error(write(dir, {{"features", f}, {"labels", labels}, {"attributes", torch::full({3, 1}, 2.0)}}), "only 0 and 1");
  expect_error(write(dir, {{"features", f}, {"labels", labels}}, {{"mumoe.class_names", R"(["only"])"}}),
               "only 1 class names");
  expect_error(write(dir, {{"features", f}, {"labels", labels}}, {{"mumoe.class_names", "not json"}}),
               "not a JSON list");
}

// Labels size every per-class table: a huge one must be refused before anything is sized by it
// (2^63 − 1 used to overflow max + 1 past the class-name check; 2^62 asked for 2^62 names).
TEST(FeatureFile, LabelsTooLargeToBeClassIndicesAreRefused) {
  testkit::TempDir dir;
  auto f = torch::randn({3, 2});
  for (int64_t huge : {std::numeric_limits<int64_t>::max(), int64_t{1} << 62, data::kMaxClasses}) {
    expect_error(write(dir, {{"features", f}, {"labels", torch::tensor({int64_t{0}, huge, int64_t{1}})}}),
                 "at most 1000000 classes");
  }
  expect_error(write(dir, {{"features", f}, {"labels", torch::tensor({0.0, 1e30, 1.0})}}), "at most 1000000 classes");
  expect_error(write(dir, {{"features", f}, {"labels", torch::tensor({int64_t{0}, std::numeric_limits<int64_t>::min(), int64_t{1}})}}),
               "negative");
  // The largest allowed index still loads (with numbered classes).
  const auto ok = data::load_feature_file(
      write(dir, {{"features", f}, {"labels", torch::tensor({int64_t{0}, data::kMaxClasses - 1, int64_t{1}})}}));
  EXPECT_EQ(static_cast<int64_t>(ok.class_names.size()), data::kMaxClasses);
}

TEST(FeatureFile, AFileWithoutSamplesIsRefused) {
  testkit::TempDir dir;
  expect_error(write(dir, {{"features", torch::zeros({0, 4})}, {"labels", torch::zeros({0}, torch::kLong)}}),
               "holds no samples");
}

}  // namespace
