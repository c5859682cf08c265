// mumoe steer GPT --layer L --expert N [--alpha 4] [--prompt "The "]: steering a byte-level
// μMoE GPT with one expert (paper App. G.2; definitions in core/analysis/lm_steering.h). The
// expert's cluster centre — the mean input h_L of its MLP block over the evaluation tokens with
// a_n ≥ threshold, from the cached per-token extraction — is added α times to the μMoE layer's
// input at every position while sampling; the unsteered text (the same seed, the same draws:
// exactly `mumoe generate`) is printed beside it.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "analysis/lm_steering.h"
#include "analysis_options.h"
#include "cli_support.h"
#include "io/errors.h"
#include "text/utf8.h"

namespace mumoe::cli {
namespace {

struct SteerOptions {
  AnalysisCliOptions analysis;
  TextCliOptions text;
  analysis::SteeringRequest request;
  std::string site = "mlp-input";
  int64_t width = 100;

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    analysis.add_to(app);
    app->add_option("--expert", request.expert, "Expert whose cluster centre steers")->required();
    app->add_option("--alpha", request.alpha, "Strength α of the added centre (default 4; 0 = unsteered)");
    app->add_option("--prompt", request.prompt, "Text to continue (default \"The \")");
    app->add_option("--tokens", request.tokens, "Bytes to generate (default 200)");
    app->add_option("--temperature", request.temperature, "Sampling temperature (default 0.8; 0 = greedy)");
    app->add_option("--top-k", request.top_k, "Sample among the k most likely bytes (default 40; 0 = all)");
    app->add_option("--seed", request.seed, "Seed of both generations (default 0)");
    app->add_option("--threshold", request.centre.threshold,
                    "Tokens with a_n ≥ threshold form the cluster (default 0.5)");
    app->add_flag("--weighted", request.centre.weighted, "Weight each token's input by a_n");
    app->add_option("--site", site,
                    "mlp-input (default, the paper: only the μMoE layer sees the shift) or residual (the shift "
                    "stays in the residual stream)");
    app->add_option("--width", width, "Text output: total width of the two columns (default 100)");
    text.add_to(app);
  }
};

// The text as display lines of at most `width` code points: split at newlines, escaped
// (text::escape_for_display: tabs, controls and invalid bytes become visible), then wrapped.
std::vector<std::string> wrap(const std::string& bytes, size_t width) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= bytes.size()) {
    const auto end = std::min(bytes.find('\n', start), bytes.size());
    const auto shown = text::escape_for_display(std::string_view(bytes).substr(start, end - start));
    std::string line;
    size_t cells = 0;
    for (size_t pos = 0; pos < shown.size();) {
      const auto c = text::decode_utf8_at(shown, pos);
      line += shown.substr(pos, static_cast<size_t>(c.length));
      pos += static_cast<size_t>(c.length);
      if (++cells == width) {
        lines.push_back(line);
        line.clear();
        cells = 0;
      }
    }
    if (!line.empty() || cells == 0) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

size_t cells(const std::string& s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); pos += static_cast<size_t>(text::decode_utf8_at(s, pos).length)) ++n;
  return n;
}

void print_side_by_side(const std::string& left_title, const std::string& left, const std::string& right_title,
                        const std::string& right, size_t column) {
  const auto l = wrap(left, column), r = wrap(right, column);
  auto pad = [&](const std::string& s) { return s + std::string(column - std::min(column, cells(s)), ' '); };
  std::cout << pad(left_title) << " | " << right_title << "\n"
            << std::string(column, '-') << "-+-" << std::string(column, '-') << "\n";
  for (size_t i = 0; i < std::max(l.size(), r.size()); ++i)
    std::cout << pad(i < l.size() ? l[i] : "") << " | " << (i < r.size() ? r[i] : "") << "\n";
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

int run_steer(SteerOptions& o) {
  o.request.site = analysis::parse_steering_site(o.site);
  if (o.request.tokens < 0) throw UsageError("--tokens must be ≥ 0");
  if (o.width < 20) throw UsageError("--width must be at least 20");
  if (!is_text_model(o.analysis))
    throw UsageError(o.analysis.model.model + " is not a GPT: steering is for text models");
  auto session = open_text_analysis(o.analysis, o.text, /*extract=*/true);
  const auto r = session->steer(o.request);
  const auto& v = r.vector;
  if (o.analysis.json) {
    nlohmann::json j = {{"model", o.analysis.model.model},
                        {"data", session->eval_set().identity},
                        {"prompt", o.request.prompt},
                        {"layer", r.layer_name},
                        {"expert", o.request.expert},
                        {"alpha", o.request.alpha},
                        {"site", analysis::to_string(o.request.site)},
                        {"threshold", v.options.threshold},
                        {"weighted", v.options.weighted},
                        {"tokens", o.request.tokens},
                        {"temperature", o.request.temperature},
                        {"top_k", o.request.top_k},
                        {"seed", o.request.seed},
                        {"unsteered", r.unsteered},
                        {"steered", r.steered},
                        {"unsteered_tokens", r.unsteered_tokens},
                        {"steered_tokens", r.steered_tokens},
                        {"first_difference", r.first_difference},
                        {"centre_norm", v.norm},
                        {"tokens_used_for_centre", v.tokens_used},
                        {"seconds", r.seconds}};
    // Sampled bytes need not be valid UTF-8: invalid sequences become U+FFFD in the JSON text;
    // the *_tokens arrays hold the exact bytes.
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  std::cout << r.layer_name << ", expert " << o.request.expert << ": centre = mean input of "
            << v.tokens_used << " tokens with a_n >= " << fixed(v.options.threshold, 2)
            << (v.options.weighted ? " (a_n-weighted)" : "") << " of " << session->eval_set().tokens()
            << ", |c| = " << fixed(v.norm, 3) << "; alpha = " << o.request.alpha << " at the "
            << analysis::to_string(o.request.site) << "; seed " << o.request.seed << "; "
            << (r.first_difference < 0 ? std::string("the texts are identical")
                                       : "first difference at byte " + std::to_string(r.first_difference))
            << "\n\n";
  const auto column = static_cast<size_t>((o.width - 3) / 2);
  print_side_by_side("unsteered", o.request.prompt + r.unsteered,
                     "steered (expert " + std::to_string(o.request.expert) + ", alpha " + fixed(o.request.alpha, 2) + ")",
                     o.request.prompt + r.steered, column);
  return kSuccess;
}

}  // namespace

Command add_steer_command(CLI::App& parent) {
  return make_command<SteerOptions>(parent, "steer",
                                    "Generate with an expert's cluster centre added at its MLP block, beside the unsteered text",
                                    run_steer);
}

}  // namespace mumoe::cli
