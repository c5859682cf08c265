// The biased benchmark (data/biased_fmnist.h) on a synthetic in-memory Fashion-MNIST-like source:
// attributes against the classes for every sample, the frame against every pixel, the train bias
// and the balanced test split, determinism, and the seeded draw against values computed
// independently (Python, from the header's description). One test runs the real
// biased-fmnist:train|test SPECs when Debian's dataset-fashion-mnist is installed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "data/biased_fmnist.h"
#include "data/dataset.h"
#include "data/image_data.h"
#include "io/errors.h"

using namespace mumoe;

namespace {

constexpr int64_t kSide = 28;

// Class c has 250 + 7c samples, in an interleaved order (sample s has the label of position
// (s · 7919) mod S of the sorted list); pixel (s, y, x) = 1 + (31s + 7y + 3x) mod 200, never 0
// or 255, so a frame of 255 is unambiguous.
int64_t class_size(int64_t c) { return 250 + 7 * c; }

data::LabelledImages synthetic_source() {
  std::vector<int64_t> sorted;
  for (int64_t c = 0; c < 10; ++c)
    for (int64_t i = 0; i < class_size(c); ++i) sorted.push_back(c);
  const int64_t samples = static_cast<int64_t>(sorted.size());
  data::LabelledImages d;
  d.labels = torch::empty({samples}, torch::kInt64);
  d.images = torch::empty({samples, 1, kSide, kSide}, torch::kUInt8);
  auto labels = d.labels.accessor<int64_t, 1>();
  auto images = d.images.accessor<uint8_t, 4>();
  for (int64_t s = 0; s < samples; ++s) {
    labels[s] = sorted[(s * 7919) % samples];
    for (int64_t y = 0; y < kSide; ++y)
      for (int64_t x = 0; x < kSide; ++x) images[s][0][y][x] = static_cast<uint8_t>(1 + (31 * s + 7 * y + 3 * x) % 200);
  }
  d.class_names = data::fashion_mnist_class_names();
  d.identity = "synthetic";
  return d;
}

const data::LabelledImages& source() {
  static const auto d = synthetic_source();
  return d;
}

int64_t column(const data::LabelledImages& d, const std::string& name) {
  const auto it = std::find(d.attribute_names.begin(), d.attribute_names.end(), name);
  EXPECT_NE(it, d.attribute_names.end()) << name;
  return it - d.attribute_names.begin();
}

bool on_frame(int64_t y, int64_t x) { return y < 2 || y >= kSide - 2 || x < 2 || x >= kSide - 2; }

// Number of framed samples and Σ s² over them: a fingerprint of the seeded draw.
std::pair<int64_t, int64_t> fingerprint(const data::LabelledImages& d) {
  const auto frame = d.attributes.select(1, column(d, "frame"));
  const auto idx = torch::arange(d.size(), torch::kInt64);
  return {frame.sum().item<int64_t>(), (frame * idx * idx).sum().item<int64_t>()};
}

std::string describe(const data::SubpopulationCounts& c, const std::string& target, const std::string& sensitive) {
  std::string out;
  for (int t : {0, 1})
    for (int s : {0, 1})
      out += target + "=" + std::to_string(t) + " " + sensitive + "=" + std::to_string(s) + ": " +
             std::to_string(c.at(t, s)) + (t == 1 && s == 1 ? "" : ", ");
  return out;
}

template <class F>
void expect_usage_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no UsageError (expected one mentioning '" << fragment << "')";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(BiasedFmnist, SplitMix64MatchesPublishedValues) {
  data::SplitMix64 a(1234567);
  for (uint64_t want : {6457827717110365317ULL, 3203168211198807973ULL, 9817491932198370423ULL,
                        4593380528125082431ULL, 16408922859458223821ULL})
    EXPECT_EQ(a.next(), want);
  EXPECT_EQ(data::SplitMix64(0).next(), 0xE220A8397B1DCDAFULL);
  data::SplitMix64 b(7);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(b.below(3), 3u);
  EXPECT_EQ(data::SplitMix64(7).below(1), 0u);
}

TEST(BiasedFmnist, InfoDescribesTheAttributes) {
  const auto& info = data::biased_fmnist_info();
  EXPECT_EQ(info.targets, (std::vector<std::string>{"footwear", "upper_body", "long_sleeves", "trousers", "carried"}));
  EXPECT_EQ(info.sensitive, "frame");
  EXPECT_EQ(info.biased_target, "long_sleeves");
  EXPECT_EQ(info.seed, data::kBiasedFmnistSeed);
  EXPECT_EQ(info.attribute_names().back(), "frame");
  EXPECT_EQ(info.target_classes.size(), info.targets.size());
}

TEST(BiasedFmnist, AttributesFollowTheClassesExactly) {
  // Written out by class name, independently of the table in the implementation.
  const std::map<std::string, std::set<std::string>> members = {
      {"footwear", {"Sandal", "Sneaker", "Ankle boot"}},
      {"upper_body", {"T-shirt/top", "Pullover", "Coat", "Shirt"}},
      {"long_sleeves", {"Pullover", "Coat", "Shirt"}},
      {"trousers", {"Trouser"}},
      {"carried", {"Bag"}}};
  for (const std::string split : {"train", "test"}) {
    const auto d = data::make_biased(source(), split);
    ASSERT_EQ(d.attribute_names, (std::vector<std::string>{"footwear", "upper_body", "long_sleeves", "trousers",
                                                           "carried", "frame"}));
    ASSERT_EQ(d.attributes.sizes(), (std::vector<int64_t>{source().size(), 6}));
    ASSERT_EQ(d.attributes.scalar_type(), torch::kInt64);
    EXPECT_TRUE(torch::equal(d.labels, source().labels));
    EXPECT_EQ(d.class_names, source().class_names);
    EXPECT_EQ(d.identity, "biased:" + split + ":synthetic");
    const auto attributes = d.attributes.accessor<int64_t, 2>();
    const auto labels = d.labels.accessor<int64_t, 1>();
    for (int64_t s = 0; s < d.size(); ++s) {
      const auto& name = d.class_names[labels[s]];
      for (const auto& [target, classes] : members)
        ASSERT_EQ(attributes[s][column(d, target)], classes.count(name) ? 1 : 0) << split << " sample " << s;
      const auto f = attributes[s][5];
      ASSERT_TRUE(f == 0 || f == 1);
    }
  }
}

TEST(BiasedFmnist, FrameIsInThePixelsExactlyWhereSensitiveIsOne) {
  const auto src = source().images.accessor<uint8_t, 4>();
  for (const std::string split : {"train", "test"}) {
    const auto d = data::make_biased(source(), split);
    ASSERT_EQ(d.images.sizes(), source().images.sizes());
    const auto images = d.images.accessor<uint8_t, 4>();
    const auto frame = d.attributes.accessor<int64_t, 2>();
    for (int64_t s = 0; s < d.size(); ++s) {
      const bool framed = frame[s][5] == 1;
      for (int64_t y = 0; y < kSide; ++y)
        for (int64_t x = 0; x < kSide; ++x) {
          const int want = framed && on_frame(y, x) ? 255 : src[s][0][y][x];
          ASSERT_EQ(images[s][0][y][x], want) << split << " sample " << s << " pixel " << y << "," << x;
        }
    }
  }
}

TEST(BiasedFmnist, FrameCoversEveryChannel) {
  auto rgb = source();
  rgb.images = rgb.images.repeat({1, 3, 1, 1});
  const auto d = data::make_biased(rgb, "test");
  const auto framed = d.attributes.select(1, 5).nonzero().squeeze(1);
  ASSERT_GT(framed.numel(), 0);
  const auto images = d.images.index_select(0, framed);
  using torch::indexing::Slice;
  for (const auto& border : {images.index({Slice(), Slice(), Slice(0, 2), Slice()}),
                             images.index({Slice(), Slice(), Slice(kSide - 2, kSide), Slice()}),
                             images.index({Slice(), Slice(), Slice(), Slice(0, 2)}),
                             images.index({Slice(), Slice(), Slice(), Slice(kSide - 2, kSide)})})
    EXPECT_EQ(border.min().item<int>(), 255);
  EXPECT_TRUE(torch::equal(d.images.index({Slice(), Slice(), Slice(2, kSide - 2), Slice(2, kSide - 2)}),
                           rgb.images.index({Slice(), Slice(), Slice(2, kSide - 2), Slice(2, kSide - 2)})));
}

TEST(BiasedFmnist, TrainSplitUnderRepresentsTheBiasedSubpopulation) {
  const auto d = data::make_biased(source(), "train");
  // Nothing is dropped.
  ASSERT_EQ(d.size(), source().size());
  // Per class: exactly the documented share, (n · percent + 50) / 100.
  const auto frame = d.attributes.select(1, 5);
  for (int64_t c = 0; c < 10; ++c) {
    const bool long_sleeves = c == 2 || c == 4 || c == 6;
    const int64_t n = class_size(c), percent = long_sleeves ? 3 : 50;
    EXPECT_EQ(frame.index({d.labels == c}).sum().item<int64_t>(), (n * percent + 50) / 100) << "class " << c;
  }
  const auto counts = data::subpopulation_counts(d, "long_sleeves", "frame");
  EXPECT_EQ(counts.total(), d.size());
  const double biased_share = double(counts.at(1, 1)) / double(counts.at(1, 0) + counts.at(1, 1));
  const double other_share = double(counts.at(0, 1)) / double(counts.at(0, 0) + counts.at(0, 1));
  EXPECT_GE(biased_share, 0.02);
  EXPECT_LE(biased_share, 0.04);
  EXPECT_GE(other_share, 0.45);
  EXPECT_LE(other_share, 0.55);
  // The low-support subpopulation exists, and the three others each hold over a fifth of the data.
  EXPECT_GE(counts.at(1, 1), 20);
  for (const auto& [t, s] : std::initializer_list<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}})
    EXPECT_GE(counts.at(t, s), counts.total() / 5) << t << "," << s;
  // The other targets are not biased: their classes are framed half the time.
  for (const std::string target : {"footwear", "trousers", "carried"}) {
    const auto c = data::subpopulation_counts(d, target, "frame");
    const double share = double(c.at(1, 1)) / double(c.at(1, 0) + c.at(1, 1));
    EXPECT_NEAR(share, 0.5, 0.01) << target;
  }
}

TEST(BiasedFmnist, TestSplitHasAllFourSubpopulations) {
  const auto d = data::make_biased(source(), "test");
  const auto frame = d.attributes.select(1, 5);
  for (int64_t c = 0; c < 10; ++c)
    EXPECT_EQ(frame.index({d.labels == c}).sum().item<int64_t>(), (class_size(c) * 50 + 50) / 100) << "class " << c;
  const auto counts = data::subpopulation_counts(d, "long_sleeves", "frame");
  for (int t : {0, 1}) {
    const int64_t all = counts.at(t, 0) + counts.at(t, 1);
    for (int s : {0, 1}) EXPECT_NEAR(double(counts.at(t, s)) / double(all), 0.5, 0.01) << t << "," << s;
  }
  EXPECT_GE(counts.at(1, 1), 300);
}

TEST(BiasedFmnist, IsDeterministic) {
  for (const std::string split : {"train", "test"}) {
    const auto a = data::make_biased(source(), split), b = data::make_biased(source(), split);
    EXPECT_TRUE(torch::equal(a.images, b.images));
    EXPECT_TRUE(torch::equal(a.attributes, b.attributes));
    EXPECT_TRUE(torch::equal(a.labels, b.labels));
  }
  // The draw itself, computed independently (Python, from the description in biased_fmnist.h) on
  // this synthetic source: guards the benchmark against silent changes.
  EXPECT_EQ(fingerprint(data::make_biased(source(), "train")), (std::pair<int64_t, int64_t>{1018, 2665794199}));
  EXPECT_EQ(fingerprint(data::make_biased(source(), "test")), (std::pair<int64_t, int64_t>{1410, 3731288961}));
}

TEST(BiasedFmnist, SplitAndSeedChangeTheAssignment) {
  const auto train = data::make_biased(source(), "train"), test = data::make_biased(source(), "test");
  const auto other_seed = data::make_biased(source(), "test", data::kBiasedFmnistSeed + 1);
  // Compare on the classes framed at 50% in both splits: same shares, different samples.
  const auto not_long = (source().labels != 2) & (source().labels != 4) & (source().labels != 6);
  const auto f_train = train.attributes.select(1, 5).index({not_long});
  const auto f_test = test.attributes.select(1, 5).index({not_long});
  const auto f_seed = other_seed.attributes.select(1, 5).index({not_long});
  EXPECT_EQ(f_train.sum().item<int64_t>(), f_test.sum().item<int64_t>());
  const auto agree = [](const torch::Tensor& a, const torch::Tensor& b) {
    return (a == b).to(torch::kFloat64).mean().item<double>();
  };
  // Independent draws agree on about half the samples.
  EXPECT_NEAR(agree(f_train, f_test), 0.5, 0.05);
  EXPECT_NEAR(agree(f_seed, f_test), 0.5, 0.05);
  EXPECT_FALSE(torch::equal(other_seed.images, test.images));
}

TEST(BiasedFmnist, SubpopulationCountsByHand) {
  const auto attributes = torch::tensor({1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1}, torch::kInt64).reshape({6, 2});
  const auto c = data::subpopulation_counts(attributes, {"t", "s"}, "t", "s", "hand");
  // Rows (t, s): (1,0) (1,1) (0,0) (0,0) (1,0) (0,1).
  EXPECT_EQ(c.at(0, 0), 2);
  EXPECT_EQ(c.at(0, 1), 1);
  EXPECT_EQ(c.at(1, 0), 2);
  EXPECT_EQ(c.at(1, 1), 1);
  EXPECT_EQ(c.total(), 6);
  const auto swapped = data::subpopulation_counts(attributes, {"t", "s"}, "s", "t", "hand");
  EXPECT_EQ(swapped.at(0, 0), 2);
  EXPECT_EQ(swapped.at(0, 1), 2);
  EXPECT_EQ(swapped.at(1, 0), 1);
  EXPECT_EQ(swapped.at(1, 1), 1);
}

TEST(BiasedFmnist, BadInputsAreUsageErrors) {
  expect_usage_error([] { data::make_biased(source(), "valid"); }, "unknown split 'valid'");
  expect_usage_error([] { data::load_image_data("biased-fmnist:valid"); }, "biased-fmnist:valid");
  expect_usage_error([] { data::load_image_data("biased-fmnist"); }, "biased-fmnist:train|test");
  auto five = source();
  five.class_names.resize(5);
  expect_usage_error([&] { data::make_biased(five, "train"); }, "10 Fashion-MNIST classes");
  auto tiny = source();
  tiny.images = tiny.images.narrow(2, 0, 4);
  expect_usage_error([&] { data::make_biased(tiny, "train"); }, "too small");
  auto flat = source();
  flat.images = flat.images.to(torch::kFloat32);
  expect_usage_error([&] { data::make_biased(flat, "train"); }, "synthetic");
  expect_usage_error([] { data::subpopulation_counts(source(), "long_sleeves", "frame"); }, "has no attributes");
  const auto d = data::make_biased(source(), "test");
  expect_usage_error([&] { data::subpopulation_counts(d, "blond", "frame"); }, "no attribute 'blond'");
  expect_usage_error([] { data::subpopulation_counts(torch::tensor({{2, 0}}, torch::kInt64), {"t", "s"}, "t", "s", "x"); },
                     "not 0/1");
}

// The real benchmark: prints the counts that README.md documents and checks them.
TEST(BiasedFmnist, RealDataMatchesTheDocumentedCounts) {
  for (const char* split : {"train", "t10k"})
    if (!std::filesystem::exists(std::string(data::kFashionMnistDir) + "/" + split + "-images-idx3-ubyte.gz"))
      GTEST_SKIP() << data::kFashionMnistDir << " lacks the " << split << " split";
  struct Expected {
    std::string split;
    int64_t counts[2][2];                // [long_sleeves][frame]
    std::pair<int64_t, int64_t> draw;    // fingerprint, computed independently (Python)
  };
  using torch::indexing::Slice;
  for (const auto& e : {Expected{"train", {{21000, 21000}, {17460, 540}}, {21540, 25714805773112}},
                        Expected{"test", {{3500, 3500}, {1500, 1500}}, {5000, 166547958064}}}) {
    const auto spec = "biased-fmnist:" + e.split;
    const auto d = data::load_image_data(spec);
    EXPECT_EQ(d.identity, spec);
    EXPECT_EQ(data::load_dataset(spec).attribute_count(), 6);
    const auto c = data::subpopulation_counts(d, "long_sleeves", "frame");
    std::cout << spec << " (" << d.size() << " images): " << describe(c, "long_sleeves", "frame") << "\n";
    for (int t : {0, 1})
      for (int s : {0, 1}) EXPECT_EQ(c.at(t, s), e.counts[t][s]) << spec << " long_sleeves=" << t << " frame=" << s;

    // The frame is there, and no unframed image has a full bright frame of its own.
    const auto plain = data::load_image_data("fashion-mnist:" + e.split);
    auto border = torch::ones({kSide, kSide}, torch::kBool);
    border.index_put_({Slice(2, kSide - 2), Slice(2, kSide - 2)}, false);
    const auto frame = d.attributes.select(1, 5).to(torch::kBool);
    const auto border_min = std::get<0>(d.images.squeeze(1).index({Slice(), border}).min(1));
    EXPECT_TRUE((border_min.index({frame}) == 255).all().item<bool>());
    EXPECT_TRUE((border_min.index({~frame}) < 255).all().item<bool>());
    const auto interior = Slice(2, kSide - 2);
    EXPECT_TRUE(torch::equal(d.images.index({Slice(), Slice(), interior, interior}),
                             plain.images.index({Slice(), Slice(), interior, interior})));
    EXPECT_TRUE(torch::equal(d.images.index({~frame}), plain.images.index({~frame})));
    const double touched = (plain.images.squeeze(1).index({Slice(), border}) > 0).to(torch::kFloat64).mean().item<double>();
    std::cout << "  share of the source's 2-pixel border that is not background: " << touched << "\n";
    EXPECT_EQ(fingerprint(d), e.draw) << spec;
  }
}

}  // namespace
