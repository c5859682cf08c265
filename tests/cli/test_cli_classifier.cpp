// The CLI on an image classifier: evaluate, features, and forward of the head on those features,
// each checked against the library on a tiny IDX data set the test writes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>


#include "data/image_data.h"
#include "io/safetensors.h"
#include "model/classifier_file.h"
#include "model/model_file.h"
#include "nn/moe_layer.h"
#include "cli_runner.h"
#include "temp_dir.h"
#include "train/classifier_training.h"

using namespace mumoe;
using testkit::TempDir;

namespace {

std::pair<int, std::string> cli_code_and_output(const std::string& args) {
  auto run = testkit::run_cli(args);
  return {run.code, run.out};
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

class CliClassifier : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(5);
    // 40 random 8×8 images with labels 0..2 as IDX test split.
    images_ = torch::randint(0, 256, {40, 8, 8}, torch::kLong).to(torch::kUInt8);
    labels_ = torch::randint(0, 3, {40}, torch::kLong);
    std::string img = std::string("\0\0\x08\x03", 4) + be32(40) + be32(8) + be32(8);
    img.append(static_cast<const char*>(images_.data_ptr()), 40 * 64);
    std::string lab = std::string("\0\0\x08\x01", 4) + be32(40);
    for (int i = 0; i < 40; ++i) lab += static_cast<char>(labels_[i].item<int64_t>());
    testkit::write_bytes(dir_.file("t10k-images-idx3-ubyte"), img);
    testkit::write_bytes(dir_.file("t10k-labels-idx1-ubyte"), lab);
    spec_ = "idx:" + dir_.path().string() + ":test";

    nn::BackboneConfig b;
    b.image_size = 8;
    b.channels1 = 4;
    b.channels2 = 4;
    b.feature_dim = 6;
    nn::LayerConfig head;
    head.input_dim = 6;
    head.output_dim = 3;
    head.expert_dims = {5};
    head.cp_rank = 4;
    classifier_ = nn::ImageClassifier(b, head);
    classifier_->eval();
    model_ = dir_.file("clf.safetensors");
    model::save_image_classifier(model_, classifier_, model::image_classifier_manifest(classifier_, {"a", "b", "c"}, {}));
  }
  TempDir dir_;
  torch::Tensor images_, labels_;
  std::string spec_, model_;
  nn::ImageClassifier classifier_{nullptr};
};

TEST_F(CliClassifier, EvaluateMatchesTheLibrary) {
  auto [code, out] = cli_code_and_output("evaluate " + model_ + " --data " + spec_ + " --json --ablate 1");
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  const auto data = data::load_image_data(spec_);
  const auto expected = train::evaluate_classifier(classifier_, data, 500, "cpu", nn::ExpertAblation::first_mode({1}));
  EXPECT_EQ(j["samples"], 40);
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), expected.accuracy);
  EXPECT_EQ(j["per_class_accuracy"].get<std::vector<double>>(), expected.per_class_accuracy);
}

// `mumoe train --router` on images trains the CNN with a router head in the μMoE head's place;
// `mumoe info` names it and `mumoe ablate` on the images equals this test's own computation:
// the trained backbone's features, the head in routing groups of 8 with expert 0 removed.
TEST_F(CliClassifier, TrainsARouterHeadOnTheBackboneAndAblatesIt) {
  const auto model = dir_.file("router.safetensors");
  auto [code, out] = cli_code_and_output("train --data " + spec_ + " --test-data " + spec_ +
                                         " --router softmax-expert-choice --experts 4 "
                                         "--group 8 --feature-dim 6 --epochs 1 --quiet --output " + model);
  ASSERT_EQ(code, 0) << out;
  auto [icode, info_text] = cli_code_and_output("info --json " + model);
  ASSERT_EQ(icode, 0) << info_text;
  const auto info = nlohmann::json::parse(info_text.substr(info_text.find('{')));
  EXPECT_EQ(info["architecture"], "image-classifier");
  EXPECT_EQ(info["layers"][0]["family"], "Softmax Expert Choice");

  auto [acode, ablated] = cli_code_and_output("ablate " + model + " --data " + spec_ + " --cache " +
                                              dir_.file("cache.sqlite") + " --experts 0 --json --quiet");
  ASSERT_EQ(acode, 0) << ablated;
  const auto j = nlohmann::json::parse(ablated.substr(ablated.find('{')));

  const auto file = model::ModelFile::load(model);
  auto trained = model::load_image_classifier(file);
  ASSERT_TRUE(trained->has_router_head());
  torch::NoGradGuard no_grad;
  const auto features = trained->features(data::to_float_images(images_.unsqueeze(1))).to(torch::kFloat64);
  auto head = nn::copy_moe_layer(trained->router_head(), torch::kFloat64, torch::kCPU);
  std::vector<torch::Tensor> with, without;
  for (int64_t b = 0; b < 40; b += 8) {
    with.push_back(head->forward(features.slice(0, b, b + 8)).output.argmax(1));
    without.push_back(head->forward(features.slice(0, b, b + 8), {0}).output.argmax(1));
  }
  const auto after = (torch::cat(without) == labels_).to(torch::kDouble).mean().item<double>();
  EXPECT_DOUBLE_EQ(j["experts"][0]["accuracy_after"].get<double>(), after);
  EXPECT_EQ(j["experts"][0]["changed_predictions"].get<int64_t>(), (torch::cat(with) != torch::cat(without)).sum().item<int64_t>());
}

TEST_F(CliClassifier, FeaturesThenForwardOfTheHeadReproducesTheLogits) {
  const auto features = dir_.file("f.safetensors"), out = dir_.file("o.safetensors");
  auto [code, text] = cli_code_and_output("features " + model_ + " --data " + spec_ + " --output " + features);
  ASSERT_EQ(code, 0) << text;
  auto f = io::SafetensorsFile::open(features);
  const auto x = data::to_float_images(images_.unsqueeze(1));
  torch::NoGradGuard g;
  EXPECT_TRUE(torch::allclose(f.read("features"), classifier_->features(x), 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(f.read("labels"), labels_));
  auto [code2, text2] = cli_code_and_output("forward " + model_ + " --layer head --tensor features --input " + features +
                                  " --output " + out);
  ASSERT_EQ(code2, 0) << text2;
  EXPECT_TRUE(torch::allclose(io::SafetensorsFile::open(out).read("output"), classifier_->forward(x).output, 1e-5, 1e-5));
}

TEST_F(CliClassifier, EvaluateALayerOnlyModelOnImagesIsAClearError) {
  const auto layer_model = dir_.file("layer.safetensors");
  ASSERT_EQ(cli_code_and_output("init --output " + layer_model + " --input-dim 4 --output-dim 3").first, 0);
  auto [code, out] = cli_code_and_output("evaluate " + layer_model + " --data " + spec_);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("bare μMoE layer: give it a features:FILE SPEC"), std::string::npos) << out;
}

TEST_F(CliClassifier, TrainsAndEvaluatesABareHeadOnAFeatureFile) {
  // The classifier's features become the training data of a head of its own.
  const auto features = dir_.file("f.safetensors");
  ASSERT_EQ(cli_code_and_output("features " + model_ + " --data " + spec_ + " --output " + features).first, 0);
  const auto head = dir_.file("head.safetensors");
  auto [code, out] = cli_code_and_output("train --data features:" + features + " --test-data features:" + features +
                               " --output " + head + " --experts 8 --rank 4 --epochs 2 --batch-size 16 --quiet --json");
  ASSERT_EQ(code, 0) << out;
  const auto file = model::ModelFile::load(head);
  EXPECT_EQ(file.manifest().architecture, "mumoe-layers");
  EXPECT_EQ(file.manifest().label_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(file.layer("head").config.input_dim, 6);
  EXPECT_EQ(file.layer("head").config.expert_dims, (std::vector<int64_t>{8}));

  auto [ecode, eout] = cli_code_and_output("evaluate " + head + " --data features:" + features + " --json");
  ASSERT_EQ(ecode, 0) << eout;
  const auto reported = nlohmann::json::parse(eout);
  // Independently: the layer's predictions on the feature rows.
  auto block = file.build_layer("head");
  const auto data = io::SafetensorsFile::open(features);
  torch::NoGradGuard no_grad;
  const auto predictions = block->forward(data.read("features")).output.argmax(1);
  const double accuracy = (predictions == data.read("labels")).to(torch::kDouble).mean().item<double>();
  EXPECT_DOUBLE_EQ(reported["accuracy"].get<double>(), accuracy);
  EXPECT_DOUBLE_EQ(file.manifest().provenance["test_metrics"]["accuracy"].get<double>(), accuracy);
}

// PNG width and height from the IHDR chunk (bytes 16–23, big-endian).
std::pair<uint32_t, uint32_t> png_size(const std::string& png) {
  auto be = [&](size_t at) {
    return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
           (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
  };
  return {be(16), be(20)};
}

TEST_F(CliClassifier, GalleryContactSheets) {
  const std::string cache = " --cache " + dir_.file("cache.sqlite") + " --quiet";
  const auto sheet = dir_.file("sheet.png");
  auto [code, out] = cli_code_and_output("gallery " + model_ + " --data " + spec_ + cache +
                               " --expert 0 --order top --count 6 --output " + sheet + " --json");
#ifndef MUMOE_WITH_OPENCV
  // A build without OpenCV (a GPU machine's LibTorch-only build) says so instead of drawing.
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("no OpenCV"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(sheet));
  return;
#endif
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  const auto items = static_cast<uint32_t>(j["items"].size());
  ASSERT_GT(items, 0u);
  const auto png = testkit::read_bytes(sheet);
  ASSERT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // Tiles of 112 px with 2 px gaps, up to 8 per row, under a 28 px title.
  const uint32_t columns = std::min(items, 8u), rows = (items + 7) / 8;
  EXPECT_EQ(png_size(png), std::make_pair(columns * 114 - 2, 28 + rows * 114));

  // A head trained on the classifier's features shows the images they came from.
  const auto features = dir_.file("f.safetensors");
  ASSERT_EQ(cli_code_and_output("features " + model_ + " --data " + spec_ + " --output " + features).first, 0);
  const auto head = dir_.file("head.safetensors");
  ASSERT_EQ(cli_code_and_output("train --data features:" + features + " --test-data '' --output " + head +
                      " --experts 4 --rank 4 --epochs 1 --quiet").first, 0);
  const std::string on_features = "gallery " + head + " --data features:" + features + cache + " --expert 1 --order top";
  auto [no_images, msg] = cli_code_and_output(on_features + " --output " + sheet);
  EXPECT_EQ(no_images, 1);
  EXPECT_NE(msg.find("--images"), std::string::npos) << msg;
  auto [with_images, out2] = cli_code_and_output(on_features + " --images " + spec_ + " --output " + dir_.file("s2.png"));
  EXPECT_EQ(with_images, 0) << out2;
  // Images that are not the feature file's samples are refused.
  const auto other = dir_.file("other");
  std::filesystem::create_directories(other);
  const auto img = testkit::read_bytes(dir_.file("t10k-images-idx3-ubyte"));
  const auto lab = testkit::read_bytes(dir_.file("t10k-labels-idx1-ubyte"));
  std::string lab_shuffled = lab;  // one label changed (classes 0–2): a different data set
  lab_shuffled[8] = static_cast<char>((lab[8] + 1) % 3);
  testkit::write_bytes(other + "/t10k-images-idx3-ubyte", img);
  testkit::write_bytes(other + "/t10k-labels-idx1-ubyte", lab_shuffled);
  auto [mismatch, out3] = cli_code_and_output(on_features + " --images idx:" + other + ":test --output " + dir_.file("s3.png"));
  EXPECT_EQ(mismatch, 1);
  EXPECT_NE(out3.find("is not the image set of"), std::string::npos) << out3;
}

}  // namespace
