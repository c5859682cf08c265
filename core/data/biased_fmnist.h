// The biased benchmark "biased-fmnist:train|test": a deterministic Fashion-MNIST attribute task
// with a real spurious bias, standing in for CelebA in the fairness experiment (spec §5, paper
// §4.2: expert-conditional bias correction of a low-support subpopulation).
//
// Target attributes (0/1, derived from the class label; Fashion-MNIST label order):
//   footwear      Sandal, Sneaker, Ankle boot
//   upper_body    T-shirt/top, Pullover, Coat, Shirt
//   long_sleeves  Pullover, Coat, Shirt                       ← the biased target
//   trousers      Trouser
//   carried       Bag
// Sensitive attribute (visible in the pixels):
//   frame         a 2-pixel frame of value 255 around the image (every channel). Fashion-MNIST
//                 backgrounds are 0, so a CNN sees it at once; the object inside is untouched
//                 except where it reaches into the outer 2 pixels.
//
// The bias is ASSIGNED, nothing is dropped: every image of the source is kept, and the frame is
// drawn on an exact, class-dependent share of each class.
//   train: 3% of each long_sleeves class (Pullover, Coat, Shirt), 50% of every other class:
//          P(frame | long_sleeves) = 3% but P(frame | not long_sleeves) = 50%, so framed
//          long-sleeved garments are the low-support subpopulation (the analogue of CelebA's
//          'blond males'), and the frame is a spurious cue for "not long-sleeved".
//   test:  50% of every class, so all four (long_sleeves × frame) subpopulations are measurable.
// long_sleeves rather than footwear is the biased target because footwear is separable from the
// other classes almost perfectly by shape, so a bias there would cost no accuracy; long sleeves
// hinge on the Shirt/T-shirt and Pullover/T-shirt confusions, where a spurious cue can matter.
//
// Share of a class of n images = (n · percent + 50) / 100 in integers (round half up). Which
// images: per class in label order, the class's sample indices (in data order) are shuffled by
// Fisher–Yates with a hand-written splitmix64 generator and the first share are framed. The
// generator is seeded with kBiasedFmnistSeed XOR the split's name ("train" / "test" as a
// big-endian ASCII integer), so the draw is the same on every run and every standard library
// (no std:: distributions), and differs between the splits.
//
// Attributes: [S, 6] int64 0/1 — the five targets above in that order, then `frame` last.
// Real counts (long_sleeves × frame) are in README.md, "Data SPECs".
#pragma once

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_data.h"

namespace mumoe::data {

/// The fixed seed of the benchmark ("mumoe" in ASCII).
inline constexpr uint64_t kBiasedFmnistSeed = 0x6d756d6f65ULL;

/// Vigna's splitmix64: state += 0x9E3779B97F4A7C15, then two xor-shift-multiply rounds.
/// Identical on every platform; `below(n)` is unbiased (rejection of the short last interval).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  /// Uniform in [0, n); n must be positive.
  uint64_t below(uint64_t n);

 private:
  uint64_t state_;
};

struct BiasedBenchmarkInfo {
  std::vector<std::string> targets;                  ///< target attribute names, attribute order
  std::vector<std::vector<int64_t>> target_classes;  ///< per target: the class labels where it is 1
  std::string sensitive;                             ///< "frame": the last attribute
  std::string biased_target;                         ///< "long_sleeves"
  int64_t train_percent_biased = 0;  ///< % of each biased_target = 1 class framed in train (3)
  int64_t train_percent_other = 0;   ///< % of every other class framed in train (50)
  int64_t test_percent = 0;          ///< % of every class framed in test (50)
  int64_t frame_width = 0;           ///< pixels (2)
  uint8_t frame_value = 0;           ///< 255
  uint64_t seed = 0;                 ///< kBiasedFmnistSeed

  /// targets followed by sensitive: the attribute_names of the benchmark.
  std::vector<std::string> attribute_names() const;
};

/// The benchmark's constants (one static instance).
const BiasedBenchmarkInfo& biased_fmnist_info();

/// Builds the biased data set from `source` (Fashion-MNIST-like: images uint8 [S, C, H, W] with
/// H, W > 2·frame_width, labels in the 10 Fashion-MNIST classes in their order) for `split`
/// ("train": biased, or "test": balanced) with the given seed. The result has the source's
/// images with frames drawn, its labels and class names, attributes [S, 6] int64 as described
/// above (any attributes of the source are replaced) and identity "biased:SPLIT:SOURCE" (the
/// SPEC loader replaces it by the SPEC). Throws UsageError naming the source for an unknown
/// split or a source of the wrong shape, type or class count.
LabelledImages make_biased(const LabelledImages& source, const std::string& split,
                           uint64_t seed = kBiasedFmnistSeed);

/// The SPEC "biased-fmnist:SPLIT": make_biased on the Fashion-MNIST `split` in `dir` (Debian's
/// dataset-fashion-mnist by default), identity "biased-fmnist:SPLIT". Throws UsageError for an
/// unknown split, FileError for missing or invalid files.
LabelledImages load_biased_fmnist(const std::string& split, const std::string& dir = kFashionMnistDir);

/// Sample counts of the four subpopulations of a (target, sensitive) attribute pair.
struct SubpopulationCounts {
  std::array<std::array<int64_t, 2>, 2> count{};  ///< count[target][sensitive]

  int64_t at(int target, int sensitive) const { return count.at(target).at(sensitive); }
  int64_t total() const { return count[0][0] + count[0][1] + count[1][0] + count[1][1]; }
};

/// Counts the samples per (target, sensitive) value of the named attributes. Throws UsageError
/// naming `identity` when the data has no attributes, a name is unknown (listing the known ones)
/// or a value is not 0/1.
SubpopulationCounts subpopulation_counts(const torch::Tensor& attributes,
                                         const std::vector<std::string>& attribute_names,
                                         const std::string& target, const std::string& sensitive,
                                         const std::string& identity);
SubpopulationCounts subpopulation_counts(const LabelledImages& data, const std::string& target,
                                         const std::string& sensitive);

}  // namespace mumoe::data
