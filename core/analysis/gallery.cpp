#include "analysis/gallery.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "io/errors.h"

namespace mumoe::analysis {
namespace {

// splitmix64: a fixed, documented generator so a seed gives the same gallery on every platform
// and standard library (std::uniform_int_distribution is implementation-defined).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t bound) { return next() % bound; }  // bias < 2^-40 for our sizes
};

}  // namespace

std::string GalleryRequest::key() const {
  std::ostringstream k;
  k << "mode" << mode << ":expert" << expert << ":" << to_string(order) << ":t" << threshold << ":n" << count << ":s"
    << seed;
  return k.str();
}

std::string to_string(GalleryOrder order) { return order == GalleryOrder::Top ? "top" : "random"; }

GalleryOrder parse_gallery_order(const std::string& text) {
  if (text == "random") return GalleryOrder::Random;
  if (text == "top") return GalleryOrder::Top;
  throw UsageError("unknown gallery order '" + text + "' (expected random or top)");
}

Gallery select_gallery(const RunData& run, const GalleryRequest& r) {
  if (r.mode < 0 || r.mode >= run.modes())
    throw UsageError("expert mode " + std::to_string(r.mode) + " does not exist (the layer has " +
                     std::to_string(run.modes()) + ")");
  const int64_t experts = run.info.expert_dims[r.mode];
  if (r.expert < 0 || r.expert >= experts)
    throw UsageError("expert " + std::to_string(r.expert) + " does not exist: mode " + std::to_string(r.mode) +
                     " has experts 0–" + std::to_string(experts - 1));
  if (r.count <= 0) throw UsageError("a gallery needs a positive sample count");
  const auto& cols = run.columns[r.mode];

  std::vector<int64_t> candidates;  // positions in the expert's column
  for (int64_t k = cols.offsets[r.expert]; k < cols.offsets[r.expert + 1]; ++k)
    if (r.order == GalleryOrder::Top || cols.values[k] >= r.threshold) candidates.push_back(k);

  Gallery g;
  g.request = r;
  g.eligible = static_cast<int64_t>(candidates.size());
  const auto take = std::min<int64_t>(r.count, g.eligible);
  if (r.order == GalleryOrder::Top) {
    std::partial_sort(candidates.begin(), candidates.begin() + take, candidates.end(), [&](int64_t a, int64_t b) {
      return cols.values[a] != cols.values[b] ? cols.values[a] > cols.values[b] : cols.samples[a] < cols.samples[b];
    });
  } else {
    SplitMix64 rng{r.seed};
    for (int64_t i = 0; i < take; ++i)  // partial Fisher–Yates
      std::swap(candidates[i], candidates[i + static_cast<int64_t>(rng.below(g.eligible - i))]);
  }
  for (int64_t i = 0; i < take; ++i) {
    const auto k = candidates[i];
    const auto s = cols.samples[k];
    g.items.push_back({s, run.labels[s], run.predictions[s], cols.values[k]});
  }
  return g;
}

}  // namespace mumoe::analysis
