#include "analysis/token_gallery.h"

#include <cstdio>

#include "analysis/result_json.h"
#include "io/errors.h"

namespace mumoe::analysis {

TokenGallery select_token_gallery(const RunData& run, const LmEvalSet& set, const GalleryRequest& request,
                                  int64_t context_radius) {
  if (run.samples() != set.tokens())
    throw UsageError("the token run has " + std::to_string(run.samples()) + " samples but the evaluation set " +
                     std::to_string(set.tokens()) + " tokens");
  const auto g = select_gallery(run, request);
  TokenGallery out;
  out.request = g.request;
  out.context_radius = context_radius;
  out.eligible = g.eligible;
  for (const auto& item : g.items) {
    TokenGalleryItem t;
    t.token = item.sample;
    t.sequence = item.sample / set.block_size;
    t.position = item.sample % set.block_size;
    t.document = set.document_of(set.offset(item.sample));
    t.token_id = set.input(item.sample);
    t.target = item.label;
    t.prediction = item.prediction;
    t.coefficient = item.coefficient;
    t.context = token_context(set, item.sample, context_radius);
    out.items.push_back(std::move(t));
  }
  return out;
}

nlohmann::json to_json(const TokenGallery& g) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& t : g.items)
    items.push_back({{"token_index", t.token},
                     {"sequence", t.sequence},
                     {"position", t.position},
                     {"document", t.document},
                     {"token_id", t.token_id},
                     {"token", t.context.token},
                     {"target", t.target},
                     {"prediction", t.prediction},
                     {"coefficient", t.coefficient},
                     {"context_before", t.context.before},
                     {"context_after", t.context.after},
                     {"context", t.context.before + "«" + t.context.token + "»" + t.context.after},
                     {"context_first", t.context.first},
                     {"context_last", t.context.last}});
  auto j = to_json(g.request);
  j["context_radius"] = g.context_radius;
  j["eligible"] = g.eligible;
  j["items"] = items;
  return j;
}

TokenGallery token_gallery_from_json(const nlohmann::json& j) {
  TokenGallery g;
  g.request = gallery_request_from_json(j);
  g.context_radius = j.at("context_radius");
  g.eligible = j.at("eligible");
  for (const auto& i : j.at("items")) {
    TokenGalleryItem t;
    t.token = i.at("token_index");
    t.sequence = i.at("sequence");
    t.position = i.at("position");
    t.document = i.at("document");
    t.token_id = i.at("token_id");
    t.target = i.at("target");
    t.prediction = i.at("prediction");
    t.coefficient = i.at("coefficient");
    t.context.before = i.at("context_before");
    t.context.token = i.at("token");
    t.context.after = i.at("context_after");
    t.context.first = i.at("context_first");
    t.context.last = i.at("context_last");
    g.items.push_back(std::move(t));
  }
  return g;
}

std::string render_token_gallery(const TokenGallery& g, bool ansi) {
  std::string out;
  char head[160];
  for (const auto& t : g.items) {
    std::snprintf(head, sizeof head, "  a=%.2f  seq %4lld pos %3lld  ", t.coefficient,
                  static_cast<long long>(t.sequence), static_cast<long long>(t.position));
    out += head;
    out += t.context.before;
    out += ansi ? "\x1b[7m" + t.context.token + "\x1b[0m" : "«" + t.context.token + "»";
    out += t.context.after + "\n";
  }
  return out;
}

}  // namespace mumoe::analysis
