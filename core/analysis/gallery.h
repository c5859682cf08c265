// Which samples an expert gallery shows (spec §4, paper Fig. 2): a seeded random draw among the
// samples with a_n ≥ threshold, or the samples with the largest a_n. Plain C++ over RunData;
// rendering is elsewhere (contact_sheet.h for PNGs, the GUI's gallery view).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/run_data.h"

namespace mumoe::analysis {

enum class GalleryOrder { Random, Top };

struct GalleryRequest {
  int64_t mode = 0;
  int64_t expert = 0;
  GalleryOrder order = GalleryOrder::Random;
  double threshold = 0.5;  ///< Random: only samples with a_n ≥ threshold; Top: ignored (a_n > 0)
  int64_t count = 32;
  uint64_t seed = 0;
  /// Only samples of this subpopulation of the data's attributes, e.g. "long_sleeves=1&frame=1"
  /// (editing/subpopulation.h, canonical text); "" = every sample.
  std::string subpopulation;
  /// A stable text form, the key of cached galleries: "mode0:expert5:random:t0.5:n32:s0" (then
  /// ":sub=…" when filtered).
  std::string key() const;
};

struct GalleryItem {
  int64_t sample = 0;
  int64_t label = 0;       ///< class index, or output bitmask (Gallery::multilabel)
  int64_t prediction = 0;  ///< likewise
  double coefficient = 0;
  /// Galleries of a ViT block's experts: the image's strongest patch for the expert (row-major
  /// in the patch grid), which the tile outlines; -1: the coefficient is the whole sample's.
  int64_t patch = -1;
};

struct Gallery {
  GalleryRequest request;
  /// Labels and predictions are a multi-label model's output bitmasks (RunData::multilabel):
  /// read them with label_text.
  bool multilabel = false;
  int64_t eligible = 0;  ///< how many samples qualified (≥ threshold, or > 0 for Top)
  std::vector<GalleryItem> items;
};

/// Throws UsageError for an expert or mode out of range or a non-positive count. A request with a
/// subpopulation needs `members` (subpopulation_members: one 0/1 per sample of the run), else
/// UsageError: a filter is never ignored.
Gallery select_gallery(const RunData& run, const GalleryRequest& request, const std::vector<uint8_t>& members = {});

/// Which samples of `run` belong to `subpopulation` ("A=1&B=0": editing/subpopulation.h), from
/// the run's attributes named `attribute_names`. Throws UsageError naming `data_identity` when an
/// attribute is missing, or when the run holds no attributes.
std::vector<uint8_t> subpopulation_members(const RunData& run, const std::vector<std::string>& attribute_names,
                                           const std::string& subpopulation, const std::string& data_identity);

/// A tile's label in words: the class name, or for a multi-label label the names of its positive
/// outputs joined by "+" ("none" when there are none); an index without a name is its number.
std::string label_text(int64_t label, const std::vector<std::string>& names, bool multilabel);

std::string to_string(GalleryOrder order);
GalleryOrder parse_gallery_order(const std::string& text);  ///< "random" | "top"

}  // namespace mumoe::analysis
