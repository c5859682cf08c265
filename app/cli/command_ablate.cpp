// mumoe ablate MODEL --data SPEC (--experts 3,17 | --all) [--method sparse|naive]: per-class
// accuracy before and after removing experts (W_n := 0), d^(n), polysemanticity (spec §4).
// --experts ablates the set together; --all ablates each expert of the mode in turn (a sweep).
// --all --shard K/N computes only shard K's experts of a backbone layer's or GPT block's sweep
// into the cache (a cluster task; `mumoe cache merge` joins the parts: analysis/sweep_shards.h).
// For a μMoE GPT (--layer transformer.h.L.mlp.MuMoE_layer) the metric is next-token accuracy
// per target byte and loss over the validation split's sequences (analysis/lm_ablation.h).
// For a μMoE layer in a ViT or MLP-Mixer backbone (--layer blocks.L.mlp, mixer_blocks.i.1.fn, …) the metric is the classifier's per-class accuracy,
// as for the head (analysis/vit_block_analysis.h).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "analysis/result_json.h"
#include "analysis/lm_ablation_results.h"
#include "cache/analysis_cache.h"
#include "cache/cache_merge.h"
#include "io/file_checks.h"
#include "analysis_options.h"
#include "cli_support.h"
#include "io/errors.h"

namespace mumoe::cli {
namespace {

struct AblateOptions {
  AnalysisCliOptions analysis;
  std::string experts;
  bool all = false;
  int64_t mode = 0;
  std::string method = "sparse";
  TextCliOptions text;
  BlockCliOptions block;
  std::string shard;  ///< "K/N": one shard of the sweep, "" = the whole sweep

  /// Declares these options on the command `app`.
  void add_to(CLI::App* app) {
    analysis.add_to(app);
    app->add_option("--experts", experts, "Experts to remove together, e.g. 3,17");
    app->add_flag("--all", all, "Remove each expert of the mode in turn (the full sweep)");
    app->add_option("--mode", mode, "Expert mode (default 0)");
    app->add_option("--method", method, "sparse (default: the fastest exact method — a rank-one correction of the stored outputs for single CP/TR layers, else re-evaluating only the affected samples) or naive (the oracle: one full pass per expert)");
    app->add_option("--shard", shard,
                    "With --all, for a layer inside a ViT or MLP-Mixer or a GPT block: compute only shard K/N's experts "
                    "into --cache, for `mumoe cache merge` (a cluster task; see slurm sweep)");
    text.add_to(app);
    block.add_to(app);
  }
};

// Progress of experts (or sequences) done, timed from this call, with an ETA, on stderr unless
// --quiet.
analysis::SweepCallback progress_from_now(const AblateOptions& o, const std::string& label) {
  const auto start = std::chrono::steady_clock::now();
  return [quiet = o.analysis.quiet, start, label](int64_t done, int64_t total) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report_progress(label, done, total, elapsed, done > 0 ? elapsed / done * (total - done) : -1, quiet);
  };
}

// "K/N" → (K, N) for --shard, with N ≥ 2; anything else is a usage error.
std::pair<int64_t, int64_t> parse_sweep_shard(const std::string& text) {
  const auto parsed = cache::parse_shard(text);
  if (!parsed) throw UsageError("--shard " + text + ": expected K/N with 0 ≤ K < N, e.g. 3/8");
  if (parsed->second == 1) throw UsageError("--shard 0/1 is the whole sweep: leave --shard out");
  return *parsed;
}

// What a shard task computed: its experts' outcomes (a part, not the sweep's answer).
template <typename Outcome>
int report_sweep_shard(const AblateOptions& o, const std::string& layer, const std::pair<int64_t, int64_t>& shard,
                       const std::vector<Outcome>& experts, const nlohmann::json& outcomes, double seconds) {
  const auto name = std::to_string(shard.first) + "/" + std::to_string(shard.second);
  const auto cache = o.analysis.session.cache_path.empty() ? cache::default_cache_path() : o.analysis.session.cache_path;
  if (o.analysis.json) {
    std::cout << json_text(nlohmann::json({{"model", o.analysis.model.model},
                                           {"layer", layer},
                                           {"method", o.method},
                                           {"shard", name},
                                           {"experts", outcomes},
                                           {"cache", cache},
                                           {"seconds", seconds}}))
              << "\n";
    return kSuccess;
  }
  std::cout << layer << ": sweep shard " << name << ", " << experts.size() << " experts removed in turn ("
            << std::fixed << std::setprecision(2) << seconds << " s), stored in " << cache << "\n"
            << "  merge the shards with `mumoe cache merge SHARDS… --into CACHE`\n";
  return kSuccess;
}

int run_shard_ablate(AblateOptions& o, analysis::AblationMethod method) {
  if (!o.all) throw UsageError("--shard splits a sweep: give --all");
  const auto shard = parse_sweep_shard(o.shard);
  if (o.analysis.recompute) throw UsageError("--recompute: a sweep shard always computes its experts");
  if (is_text_model(o.analysis)) {
    if (o.mode != 0) throw UsageError("a GPT's MLP blocks have one expert mode (--mode 0)");
    auto session = open_text_analysis(o.analysis, o.text, /*extract=*/false);
    const auto answer =
        session->sweep_shard(method, shard.first, shard.second, progress_from_now(o, "ablating experts"));
    return report_sweep_shard(o, session->layer_name(), shard, answer.value.experts,
                              analysis::to_json(answer.value).at("experts"), answer.seconds);
  }
  // Refused before a head's whole extraction would run for nothing.
  auto session = o.analysis.session;
  session.model_path = o.analysis.model.model;
  session.overrides = o.analysis.model.overrides();
  if (!analysis::names_vit_block(session))
    throw UsageError("--shard splits the sweep of a layer inside a ViT or MLP-Mixer (--layer blocks.L.mlp, …) or of "
                     "a GPT block; a head's sweep takes seconds once extracted: shard its extraction (analyze --shard "
                     "K/N, or slurm analyze)");
  auto layer = open_layer_analysis(o.analysis, o.block);
  const auto answer =
      layer->sweep_shard(o.mode, method, shard.first, shard.second, progress_from_now(o, "ablating experts"));
  nlohmann::json outcomes = nlohmann::json::array();
  for (const auto& e : answer.value.experts) outcomes.push_back(analysis::to_json(e));
  return report_sweep_shard(o, layer->layer_name(), shard, answer.value.experts, outcomes, answer.seconds);
}


int run_text_ablate(AblateOptions& o, analysis::AblationMethod method) {
  if (o.mode != 0) throw UsageError("a GPT's MLP blocks have one expert mode (--mode 0)");
  auto session = open_text_analysis(o.analysis, o.text, /*extract=*/false);
  const auto answer = o.all ? session->sweep(method, progress_from_now(o, "ablating experts"), o.analysis.recompute)
                            : session->ablate(parse_int_list(o.experts, "--experts"), method, o.analysis.recompute,
                                              progress_from_now(o, "baseline pass (sequences)"));
  const auto& r = answer.value;
  if (o.analysis.json) {
    auto j = analysis::to_json(r);
    j["model"] = o.analysis.model.model;
    j["data"] = session->eval_set().identity;
    j["layer"] = session->layer_name();
    j["from_cache"] = answer.from_cache;
    j["seconds"] = answer.seconds;
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  const auto& b = r.baseline;
  std::cout << std::fixed << std::setprecision(4) << session->layer_name() << ": " << (o.all ? "each expert" : "experts " + o.experts)
            << " ablated (" << o.method << ", " << std::setprecision(2) << answer.seconds << " s"
            << (answer.from_cache ? ", from the cache" : "") << ") on " << b.tokens << " tokens of "
            << session->eval_set().identity << "\n"
            << std::setprecision(4) << "  next-token accuracy before " << b.before.overall << ", loss " << b.loss_before
            << "\n";
  auto order = r.experts;
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    return x.outcome.after.overall < y.outcome.after.overall;
  });
  for (size_t i = 0; i < std::min<size_t>(o.all ? 10 : 1, order.size()); ++i) {
    const auto& e = order[i];
    std::cout << "  " << (o.all ? "expert " + std::to_string(e.outcome.experts[0]) : std::string("after")) << "  accuracy "
              << e.outcome.after.overall << "  loss " << e.loss_after << "  polysemanticity " << e.outcome.polysemanticity
              << "  (" << e.outcome.changed_predictions << " predictions changed; " << e.outcome.affected_samples
              << " tokens with a_n > 0 in " << e.affected_sequences << " sequences)\n";
  }
  if (o.all)
    std::cout << "  experts whose removal changes a class accuracy: " << r.experts_with_effect
              << ", mean polysemanticity " << r.mean_polysemanticity << "\n";
  return kSuccess;
}

// Any image classifier's layer through the one entry point (analysis/layer_analysis.h): a head's
// samples, or a backbone layer's images each counted by its strongest row (sample_rows) — only
// the words and two JSON fields differ.
int run_layer_ablate(AblateOptions& o, analysis::AblationMethod method, analysis::LayerAnalysis& layer) {
  const auto rows = layer.sample_rows();
  const bool images = rows.patch_grid > 0;
  const std::string samples = images ? "images" : "samples";
  const auto before = layer.accuracy();
  const auto& names = layer.class_names();
  nlohmann::json j = {{"model", o.analysis.session.model_path},
                      {"data", o.analysis.session.data_spec},
                      {"layer", layer.layer_name()},
                      {"mode", o.mode},
                      {"method", o.method},
                      {"class_names", names},
                      {"per_class_accuracy_before", before.per_class},
                      {"accuracy_before", before.overall}};
  // A multi-label model's "classes" are its outputs, each decided by its logit's sign.
  if (layer.multilabel()) j["multilabel"] = true;
  if (images) {
    j["images"] = layer.samples();
    j["affected_counts_class_tokens_only"] = rows.class_tokens_only;
  }
  const auto used_by = [&](int64_t affected) {
    return std::to_string(affected) + (rows.class_tokens_only ? " images whose class token uses it"
                                                               : " " + samples + " use it");
  };
  std::cout << std::fixed << std::setprecision(4);
  if (o.all) {
    // Kept in the cache (a backbone layer's too, where merged sweep shards land).
    const auto answer = layer.sweep(o.mode, method, progress_from_now(o, "ablating experts"), o.analysis.recompute);
    const auto& sweep = answer.value;
    if (o.analysis.json) {
      j["experts"] = nlohmann::json::array();
      for (const auto& e : sweep.experts) j["experts"].push_back(analysis::to_json(e));
      j["mean_polysemanticity"] = analysis::number_or_null(sweep.mean_polysemanticity);
      j["experts_with_effect"] = sweep.experts_with_effect;
      j["from_cache"] = answer.from_cache;
      j["compute_seconds"] = sweep.seconds;
      j["seconds"] = answer.seconds;
      std::cout << json_text(j) << "\n";
      return kSuccess;
    }
    std::cout << layer.layer_name() << ": swept " << sweep.experts.size() << " experts of mode " << o.mode << " ("
              << o.method << ", " << std::setprecision(2) << answer.seconds << " s"
              << (answer.from_cache ? ", from the cache" : "") << ") on " << layer.samples() << " " << samples
              << " of " << o.analysis.session.data_spec << "\n"
              << std::setprecision(4) << "  accuracy before " << before.overall << "\n"
              << "  experts whose removal changes a class accuracy: " << sweep.experts_with_effect << "\n"
              << "  mean polysemanticity over them: " << sweep.mean_polysemanticity << "\n";
    auto order = sweep.experts;
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.after.overall < b.after.overall; });
    std::cout << "  largest accuracy drops:\n";
    for (size_t i = 0; i < std::min<size_t>(10, order.size()); ++i)
      std::cout << "    expert " << std::setw(4) << order[i].experts[0] << "  accuracy " << order[i].after.overall
                << "  polysemanticity " << order[i].polysemanticity << "  (" << used_by(order[i].affected_samples)
                << ")\n";
    return kSuccess;
  }
  const auto answer = layer.ablate(o.mode, parse_int_list(o.experts, "--experts"), method);
  const auto& e = answer.value;
  if (o.analysis.json) {
    j["experts"] = nlohmann::json::array({analysis::to_json(e)});
    j["from_cache"] = answer.from_cache;
    j["seconds"] = answer.seconds;
    std::cout << json_text(j) << "\n";
    return kSuccess;
  }
  std::cout << "experts " << o.experts << " of mode " << o.mode << " of " << layer.layer_name() << " ablated ("
            << o.method << (answer.from_cache ? ", from the cache" : "") << ")\n"
            << "  accuracy " << before.overall << " → " << e.after.overall << "  (" << e.changed_predictions
            << " predictions changed; " << used_by(e.affected_samples) << "; polysemanticity " << e.polysemanticity
            << ")\n";
  for (size_t c = 0; c < before.per_class.size(); ++c)
    if (before.count[c] > 0)
      std::cout << "    " << std::left << std::setw(14)
                << io::printable(c < names.size() ? names[c] : "class " + std::to_string(c)) << std::right
                << std::setw(8) << before.per_class[c] << " → " << std::setw(8) << e.after.per_class[c] << "\n";
  return kSuccess;
}

int run_ablate(AblateOptions& o) {
  if (o.all == !o.experts.empty()) throw UsageError("give either --experts 3,17 or --all");
  const auto method = analysis::parse_ablation_method(o.method);
  if (!o.shard.empty()) return run_shard_ablate(o, method);
  if (is_text_model(o.analysis)) return run_text_ablate(o, method);
  // One entry point opens the layer wherever it is (analysis/layer_analysis.h).
  auto layer = open_layer_analysis(o.analysis, o.block);
  return run_layer_ablate(o, method, *layer);
}

}  // namespace

Command add_ablate_command(CLI::App& parent) {
  return make_command<AblateOptions>(parent, "ablate",
                                     "Counterfactual ablation: per-class accuracy without some experts",
                                     run_ablate);
}

}  // namespace mumoe::cli
