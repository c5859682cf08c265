#include "analysis/gallery.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "editing/subpopulation.h"
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
  if (!subpopulation.empty()) k << ":sub=" << subpopulation;
  return k.str();
}

std::string to_string(GalleryOrder order) { return order == GalleryOrder::Top ? "top" : "random"; }

GalleryOrder parse_gallery_order(const std::string& text) {
  if (text == "random") return GalleryOrder::Random;
  if (text == "top") return GalleryOrder::Top;
  throw UsageError("unknown gallery order '" + text + "' (expected random or top)");
}

Gallery select_gallery(const RunData& run, const GalleryRequest& r, const std::vector<uint8_t>& members) {
  if (r.mode < 0 || r.mode >= run.modes())
    throw UsageError("expert mode " + std::to_string(r.mode) + " does not exist (the layer has " +
                     std::to_string(run.modes()) + ")");
  const int64_t experts = run.info.expert_dims[r.mode];
  if (r.expert < 0 || r.expert >= experts)
    throw UsageError("expert " + std::to_string(r.expert) + " does not exist: mode " + std::to_string(r.mode) +
                     " has experts 0–" + std::to_string(experts - 1));
  if (r.count <= 0) throw UsageError("a gallery needs a positive sample count");
  const bool filtered = !r.subpopulation.empty();
  if (filtered && static_cast<int64_t>(members.size()) != run.samples())
    throw UsageError("a gallery of the subpopulation " + r.subpopulation +
                     " needs the data's attributes, which this analysis does not hold");
  const auto& cols = run.columns[r.mode];

  std::vector<int64_t> candidates;  // positions in the expert's column
  for (int64_t k = cols.offsets[r.expert]; k < cols.offsets[r.expert + 1]; ++k)
    if ((r.order == GalleryOrder::Top || cols.values[k] >= r.threshold) && (!filtered || members[cols.samples[k]]))
      candidates.push_back(k);

  Gallery g;
  g.request = r;
  g.multilabel = run.multilabel;
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

std::vector<uint8_t> subpopulation_members(const RunData& run, const std::vector<std::string>& attribute_names,
                                           const std::string& subpopulation, const std::string& data_identity) {
  const auto parsed = editing::parse_subpopulation(subpopulation);
  const int64_t k = run.info.attribute_count, samples = run.samples();
  if (k == 0 || static_cast<int64_t>(run.attributes.size()) != samples * k)
    throw UsageError(data_identity + " has no attributes, so no subpopulation (" + subpopulation + ") can be chosen");
  const auto columns = editing::resolve_columns(parsed, attribute_names, data_identity);
  return editing::subpopulation_mask(parsed, columns, run.attributes.data(), samples, k);
}

std::string label_text(int64_t label, const std::vector<std::string>& names, bool multilabel) {
  const auto name = [&](int64_t c) {
    return c >= 0 && c < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(c)] : std::to_string(c);
  };
  if (!multilabel) return name(label);
  std::string text;
  for (int64_t o = 0; o < 63; ++o)
    if ((label >> o) & 1) text += (text.empty() ? "" : "+") + name(o);
  return text.empty() ? "none" : text;
}

}  // namespace mumoe::analysis
