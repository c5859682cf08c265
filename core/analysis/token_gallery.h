// Token galleries (spec §4, paper App. G.1): the tokens an expert of a GPT's MLP block
// processes, each shown inside its context window with the token marked. The selection is the
// image galleries' (select_gallery: seeded random draw among a_n ≥ threshold, or the largest a_n)
// applied to a per-token run; this file adds where each token sits and its context. Torch-free.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/gallery.h"
#include "analysis/lm_eval_set.h"
#include "analysis/run_data.h"

namespace mumoe::analysis {

struct TokenGalleryItem {
  int64_t token = 0;       ///< index in the evaluation set (the run's sample index)
  int64_t sequence = 0;    ///< token / block_size
  int64_t position = 0;    ///< token % block_size
  int64_t document = 0;    ///< document of the validation split it belongs to
  int32_t token_id = 0;    ///< the token the expert saw
  int64_t target = 0;      ///< the next token
  int64_t prediction = 0;  ///< the model's argmax next token
  double coefficient = 0;  ///< a_n
  TokenContext context;
};

struct TokenGallery {
  GalleryRequest request;
  int64_t context_radius = 24;
  int64_t eligible = 0;
  std::vector<TokenGalleryItem> items;
};

/// select_gallery(run, request) with each item placed in `set` (the set the run was extracted
/// from) and given ±context_radius tokens of context. Throws UsageError as select_gallery does
/// and when the run does not have set.tokens() samples.
TokenGallery select_token_gallery(const RunData& run, const LmEvalSet& set, const GalleryRequest& request,
                                  int64_t context_radius);

nlohmann::json to_json(const TokenGallery& g);
TokenGallery token_gallery_from_json(const nlohmann::json& j);

/// One line per item: "  a=0.93  seq 12 pos 40  …context«token»context…", the token in «» or,
/// with ansi, in reverse video.
std::string render_token_gallery(const TokenGallery& g, bool ansi = false);

}  // namespace mumoe::analysis
