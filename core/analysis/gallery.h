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
  /// A stable text form, the key of cached galleries: "mode0:expert5:random:t0.5:n32:s0".
  std::string key() const;
};

struct GalleryItem {
  int64_t sample = 0;
  int64_t label = 0;
  int64_t prediction = 0;
  double coefficient = 0;
  /// Galleries of a ViT block's experts: the image's strongest patch for the expert (row-major
  /// in the patch grid), which the tile outlines; -1: the coefficient is the whole sample's.
  int64_t patch = -1;
};

struct Gallery {
  GalleryRequest request;
  int64_t eligible = 0;  ///< how many samples qualified (≥ threshold, or > 0 for Top)
  std::vector<GalleryItem> items;
};

/// Throws UsageError for an expert or mode out of range or a non-positive count.
Gallery select_gallery(const RunData& run, const GalleryRequest& request);

std::string to_string(GalleryOrder order);
GalleryOrder parse_gallery_order(const std::string& text);  ///< "random" | "top"

}  // namespace mumoe::analysis
