#include "data/biased_fmnist.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>

#include "io/errors.h"

namespace mumoe::data {
namespace {

constexpr int64_t kClassCount = 10;

// The split's name as a big-endian ASCII integer: "train" = 0x747261696e, "test" = 0x74657374.
uint64_t split_salt(const std::string& split) {
  uint64_t salt = 0;
  for (unsigned char c : split) salt = (salt << 8) | c;
  return salt;
}

void check_split(const std::string& split, const std::string& what) {
  if (split != "train" && split != "test")
    throw UsageError(what + ": unknown split '" + split + "' (expected train or test)");
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

void check_source(const LabelledImages& source) {
  const std::string who = "biased benchmark source '" + source.identity + "'";
  const auto& info = biased_fmnist_info();
  if (!source.images.defined() || !source.labels.defined())
    throw UsageError(who + ": has no images or no labels");
  if (source.images.dim() != 4 || source.images.scalar_type() != torch::kUInt8)
    throw UsageError(who + ": expected uint8 images of shape [S, C, H, W]");
  if (source.labels.dim() != 1 || source.labels.scalar_type() != torch::kInt64 ||
      source.labels.size(0) != source.images.size(0))
    throw UsageError(who + ": expected int64 labels of shape [" + std::to_string(source.images.size(0)) + "]");
  const int64_t min_side = 2 * info.frame_width + 1;
  if (source.images.size(2) < min_side || source.images.size(3) < min_side)
    throw UsageError(who + ": images of " + std::to_string(source.images.size(2)) + "x" +
                     std::to_string(source.images.size(3)) + " are too small for a " +
                     std::to_string(info.frame_width) + "-pixel frame");
  if (static_cast<int64_t>(source.class_names.size()) != kClassCount)
    throw UsageError(who + ": expected the 10 Fashion-MNIST classes, got " +
                     std::to_string(source.class_names.size()) + " class names");
  if (source.labels.numel() &&
      (source.labels.min().item<int64_t>() < 0 || source.labels.max().item<int64_t>() >= kClassCount))
    throw UsageError(who + ": labels outside [0, 10)");
}

// Draws the frame on sample `s` of contiguous uint8 images [S, C, H, W].
void draw_frame(uint8_t* images, int64_t s, int64_t channels, int64_t height, int64_t width, int64_t frame,
                uint8_t value) {
  for (int64_t c = 0; c < channels; ++c) {
    uint8_t* plane = images + (s * channels + c) * height * width;
    for (int64_t y = 0; y < height; ++y) {
      const bool full_row = y < frame || y >= height - frame;
      for (int64_t x = 0; x < width; ++x)
        if (full_row || x < frame || x >= width - frame) plane[y * width + x] = value;
    }
  }
}

}  // namespace

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t n) {
  if (n == 0) throw UsageError("SplitMix64::below: n must be positive");
  // 2^64 mod n values at the bottom would make small results more likely: skip them.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = next();
    if (r >= threshold) return r % n;
  }
}

std::vector<std::string> BiasedBenchmarkInfo::attribute_names() const {
  auto names = targets;
  names.push_back(sensitive);
  return names;
}

const BiasedBenchmarkInfo& biased_fmnist_info() {
  static const BiasedBenchmarkInfo info = [] {
    BiasedBenchmarkInfo i;
    // Labels: 0 T-shirt/top, 1 Trouser, 2 Pullover, 3 Dress, 4 Coat, 5 Sandal, 6 Shirt,
    // 7 Sneaker, 8 Bag, 9 Ankle boot.
    i.targets = {"footwear", "upper_body", "long_sleeves", "trousers", "carried"};
    i.target_classes = {{5, 7, 9}, {0, 2, 4, 6}, {2, 4, 6}, {1}, {8}};
    i.sensitive = "frame";
    i.biased_target = "long_sleeves";
    i.train_percent_biased = 3;
    i.train_percent_other = 50;
    i.test_percent = 50;
    i.frame_width = 2;
    i.frame_value = 255;
    i.seed = kBiasedFmnistSeed;
    return i;
  }();
  return info;
}

LabelledImages make_biased(const LabelledImages& source, const std::string& split, uint64_t seed) {
  check_split(split, "biased benchmark of '" + source.identity + "'");
  check_source(source);
  const auto& info = biased_fmnist_info();
  const int64_t samples = source.images.size(0);
  const int64_t targets = static_cast<int64_t>(info.targets.size());

  LabelledImages out;
  out.images = source.images.clone(torch::MemoryFormat::Contiguous);
  out.labels = source.labels.clone(torch::MemoryFormat::Contiguous);
  out.class_names = source.class_names;
  out.attribute_names = info.attribute_names();
  out.identity = "biased:" + split + ":" + source.identity;
  out.attributes = torch::zeros({samples, targets + 1}, torch::kInt64);

  const auto* labels = out.labels.data_ptr<int64_t>();
  auto* attributes = out.attributes.data_ptr<int64_t>();
  const int64_t columns = targets + 1;

  // Target attributes: a lookup table class → 0/1 per target.
  std::vector<std::array<int64_t, kClassCount>> table(targets);
  for (int64_t t = 0; t < targets; ++t) {
    table[t].fill(0);
    for (int64_t c : info.target_classes[t]) table[t][c] = 1;
  }
  for (int64_t s = 0; s < samples; ++s)
    for (int64_t t = 0; t < targets; ++t) attributes[s * columns + t] = table[t][labels[s]];

  // Sensitive attribute: an exact share of each class, chosen by a seeded shuffle.
  const auto biased = std::find(info.targets.begin(), info.targets.end(), info.biased_target) - info.targets.begin();
  std::vector<std::vector<int64_t>> members(kClassCount);
  for (int64_t s = 0; s < samples; ++s) members[labels[s]].push_back(s);
  SplitMix64 rng(seed ^ split_salt(split));
  auto* pixels = out.images.data_ptr<uint8_t>();
  const int64_t channels = out.images.size(1), height = out.images.size(2), width = out.images.size(3);
  for (int64_t c = 0; c < kClassCount; ++c) {
    auto& idx = members[c];
    const int64_t n = static_cast<int64_t>(idx.size());
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(idx[i], idx[rng.below(static_cast<uint64_t>(i) + 1)]);
    const int64_t percent = split == "test"    ? info.test_percent
                            : table[biased][c] ? info.train_percent_biased
                                               : info.train_percent_other;
    const int64_t framed = (n * percent + 50) / 100;
    for (int64_t i = 0; i < framed; ++i) {
      attributes[idx[i] * columns + targets] = 1;
      draw_frame(pixels, idx[i], channels, height, width, info.frame_width, info.frame_value);
    }
  }
  return out;
}

LabelledImages load_biased_fmnist(const std::string& split, const std::string& dir) {
  const std::string spec = "biased-fmnist:" + split;
  check_split(split, "data SPEC '" + spec + "'");
  auto out = make_biased(load_idx_directory(dir, split, fashion_mnist_class_names(), spec), split);
  out.identity = spec;
  return out;
}

SubpopulationCounts subpopulation_counts(const torch::Tensor& attributes,
                                         const std::vector<std::string>& attribute_names,
                                         const std::string& target, const std::string& sensitive,
                                         const std::string& identity) {
  if (!attributes.defined() || attributes.dim() != 2 || attributes.size(1) == 0)
    throw UsageError(identity + ": has no attributes (needed for subpopulations of " + target + " x " + sensitive + ")");
  if (attributes.size(1) != static_cast<int64_t>(attribute_names.size()))
    throw UsageError(identity + ": " + std::to_string(attributes.size(1)) + " attribute columns but " +
                     std::to_string(attribute_names.size()) + " attribute names");
  auto column = [&](const std::string& name) {
    const auto it = std::find(attribute_names.begin(), attribute_names.end(), name);
    if (it == attribute_names.end())
      throw UsageError(identity + ": no attribute '" + name + "' (attributes: " + join(attribute_names) + ")");
    return it - attribute_names.begin();
  };
  const auto t = column(target), s = column(sensitive);
  const auto a = attributes.to(torch::kInt64).contiguous();
  const auto acc = a.accessor<int64_t, 2>();
  SubpopulationCounts counts;
  for (int64_t i = 0; i < a.size(0); ++i) {
    const int64_t tv = acc[i][t], sv = acc[i][s];
    if ((tv != 0 && tv != 1) || (sv != 0 && sv != 1))
      throw UsageError(identity + ": attribute values of sample " + std::to_string(i) + " are not 0/1");
    ++counts.count[tv][sv];
  }
  return counts;
}

SubpopulationCounts subpopulation_counts(const LabelledImages& data, const std::string& target,
                                         const std::string& sensitive) {
  return subpopulation_counts(data.attributes, data.attribute_names, target, sensitive, data.identity);
}

}  // namespace mumoe::data
