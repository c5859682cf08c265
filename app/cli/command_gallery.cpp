// mumoe gallery MODEL --data SPEC --expert N [--order random|top] [--output sheet.png]: the
// samples an expert processes (spec §4): a seeded random draw among a_n ≥ threshold, or the
// largest a_n; as JSON and/or a PNG contact sheet with label and coefficient overlaid.
// For a μMoE GPT (--layer transformer.h.L.mlp.MuMoE_layer) the samples are tokens of the
// validation split, shown inside ±--context tokens of their document with the token marked.
// For a μMoE layer in a ViT or MLP-Mixer backbone (--layer blocks.L.mlp, mixer_blocks.i.1.fn, …) the samples are images, each with its strongest
// patch for the expert outlined (the paper's MLP-mixer galleries); the order is top unless asked.
#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "analysis/result_json.h"
#include "io/file_checks.h"
#include "io/output_files.h"
#include "analysis/token_gallery.h"
#include "analysis_options.h"
#include "cli_support.h"
#include "io/errors.h"

namespace mumoe::cli {
namespace {

struct GalleryOptions {
  AnalysisCliOptions analysis;
  analysis::GalleryRequest request;
  std::string order;  ///< "" = random (the default), except for a ViT block (top)
  std::string output;
  bool top = false;
  int64_t context = 24;
  bool ansi = false;
  TextCliOptions text;
  BlockCliOptions block;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    analysis.add_to(app);
    app->add_option("--expert", request.expert, "Expert index")->required();
    app->add_option("--mode", request.mode, "Expert mode (default 0)");
    app->add_option("--order", order,
                    "random (default: seeded draw among a_n ≥ threshold) or top (the default of a ViT block, whose images count by their strongest patch)");
    app->add_option("--threshold", request.threshold, "Minimum coefficient for random galleries (default 0.5)");
    app->add_option("--count", request.count, "Samples (default 32)");
    app->add_option("--seed", request.seed, "Seed of the random draw (default 0)");
    app->add_option("--output", output, "Write a PNG contact sheet");
    app->add_option("--images", analysis.session.gallery_images,
                    "Images of a feature file's samples, in the same order (e.g. fashion-mnist:test)");
    app->add_flag("--top", top, "Same as --order top");
    app->add_option("--subpop", request.subpopulation,
                    "Only samples of this subpopulation of the data's attributes, e.g. 'long_sleeves=1&frame=1'");
    app->add_option("--context", context, "GPT models: tokens of context on each side (default 24)");
    app->add_flag("--ansi", ansi, "GPT models: mark the token in reverse video instead of «»");
    text.add_to(app);
    block.add_to(app);
  }
};

std::string two_decimals(double v) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << v;
  return s.str();
}

int run_text_gallery(GalleryOptions& o) {
  if (!o.output.empty()) throw UsageError("--output (PNG contact sheets) is for image models; GPT galleries are text");
  auto session = open_text_analysis(o.analysis, o.text, /*extract=*/true);
  const auto answer = session->gallery(o.request, o.context);
  const auto& g = answer.value;
  if (o.analysis.json) {
    auto j = analysis::to_json(g);
    j["model"] = o.analysis.model.model;
    j["data"] = session->eval_set().identity;
    j["layer"] = session->layer_name();
    j["tokens"] = session->eval_set().tokens();
    j["from_cache"] = answer.from_cache;
    j["seconds"] = answer.seconds;
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  std::cout << session->layer_name() << ", expert " << g.request.expert << ": " << g.items.size() << " of "
            << g.eligible << " eligible tokens ("
            << (g.request.order == analysis::GalleryOrder::Top ? "largest a_n"
                                                               : "random with a_n >= " + two_decimals(g.request.threshold))
            << ", " << session->eval_set().tokens() << " tokens of " << session->eval_set().identity << ")\n"
            << analysis::render_token_gallery(g, o.ansi);
  return kSuccess;
}

int run_gallery(GalleryOptions& o) {
  io::check_outputs({{o.output, "--output"}}, analysis_inputs(o.analysis));
  if (is_text_model(o.analysis)) {
    if (!o.request.subpopulation.empty()) throw UsageError("--subpop is for image data with attributes, not a GPT's text");
    o.request.order = o.top ? analysis::GalleryOrder::Top
                            : analysis::parse_gallery_order(o.order.empty() ? std::string("random") : o.order);
    return run_text_gallery(o);
  }
#ifndef MUMOE_WITH_OPENCV
  if (!o.output.empty()) throw UsageError("this build has no OpenCV: PNG galleries are not available");
#endif
  if (o.request.count <= 0) throw UsageError("a gallery needs a positive sample count");
  auto a = open_layer_analysis(o.analysis, o.block);
  // A backbone layer's samples are images, each by its strongest patch (or channel).
  const auto rows = a->sample_rows();
  const bool block = rows.patch_grid > 0;
  // A backbone layer's default order is top: its images' strongest-patch coefficients rarely reach
  // the random draw's threshold.
  const auto default_order = block ? analysis::GalleryOrder::Top : analysis::GalleryOrder::Random;
  o.request.order = o.top ? analysis::GalleryOrder::Top : o.order.empty() ? default_order : analysis::parse_gallery_order(o.order);
  const auto answer = a->gallery(o.request);
  const auto& g = answer.value;
  auto name = [&](int64_t label) {
    if (g.multilabel) return analysis::label_text(label, a->class_names(), true);
    return label >= 0 && label < static_cast<int64_t>(a->class_names().size()) ? a->class_names()[label]
                                                                               : "class " + std::to_string(label);
  };
  if (!o.output.empty()) {
    if (block && g.items.empty())
      throw UsageError("expert " + std::to_string(o.request.expert) + " of " + a->layer_name() +
                       (o.request.order == analysis::GalleryOrder::Top
                            ? " gives no patch (or channel) of these " + std::to_string(a->samples()) +
                                  " images a coefficient above 0 (it may serve only the class token)"
                            : " reaches a >= " + two_decimals(o.request.threshold) + " in no patch of these " +
                                  std::to_string(a->samples()) + " images (try --order top or a lower --threshold)") +
                       ": no sheet to draw");
    a->write_gallery_sheet(o.output, g);
  }
  if (o.analysis.json) {
    auto j = analysis::to_json(g);
    for (auto& item : j["items"]) {
      if (block && rows.rows_are_patches) {
        const auto patch = item["patch"].get<int64_t>();
        item["row"] = patch / rows.patch_grid;
        item["column"] = patch % rows.patch_grid;
      } else if (block) {  // a Mixer's token mixing: the strongest channel, no place in the image
        item["channel"] = a->strongest_row(item["sample"].get<int64_t>(), o.request.expert);
      }
      item["class_name"] = name(item["label"].get<int64_t>());
      if (g.multilabel) {  // the bitmasks spelled out: the outputs that are positive, and predicted so
        item["positive_outputs"] = item["class_name"];
        item["predicted_outputs"] = name(item["prediction"].get<int64_t>());
      }
    }
    j["model"] = o.analysis.model.model;
    j["data"] = o.analysis.session.data_spec;
    j["layer"] = a->layer_name();
    j["from_cache"] = answer.from_cache;
    j["seconds"] = answer.seconds;
    if (block) {
      j["images"] = a->samples();
      j["patch_grid"] = rows.patch_grid;
    }
    if (!o.output.empty()) j["output"] = o.output;
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  if (block) {
    std::cout << a->layer_name() << ", expert " << o.request.expert << ": " << g.items.size() << " of " << g.eligible
              << " images ("
              << (o.request.order == analysis::GalleryOrder::Top
                      ? "largest strongest-patch a_n"
                      : "random with a patch of a_n >= " + two_decimals(o.request.threshold))
              << ", " << a->samples() << " images)\n";
  } else {
    std::cout << "expert " << g.request.expert << " (mode " << g.request.mode << "): " << g.items.size() << " of "
              << g.eligible << " eligible samples"
              << (g.request.subpopulation.empty() ? "" : " of the subpopulation " + g.request.subpopulation) << "\n";
  }
  for (const auto& item : g.items) {
    std::cout << "  sample " << std::setw(6) << item.sample;
    if (block && rows.rows_are_patches)
      std::cout << "  patch (" << item.patch / rows.patch_grid << ", " << item.patch % rows.patch_grid << ")";
    else if (block)
      std::cout << "  channel " << a->strongest_row(item.sample, o.request.expert);
    std::cout << "  a = " << two_decimals(item.coefficient) << "  " << io::printable(name(item.label));
    if (g.multilabel && item.prediction != item.label)
      std::cout << "  (predicted " << io::printable(name(item.prediction)) << ")";
    std::cout << "\n";
  }
  if (!o.output.empty()) std::cout << "wrote " << o.output << "\n";
  return kSuccess;
}

}  // namespace

Command add_gallery_command(CLI::App& parent) {
  return make_command<GalleryOptions>(parent, "gallery",
                                      "The samples an expert processes (random above a threshold, or top)",
                                      run_gallery);
}

}  // namespace mumoe::cli
