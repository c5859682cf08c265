#include "analysis/layer_comparison.h"
#include "analysis/layer_analysis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "analysis/result_json.h"
#include "io/errors.h"
#include "model/model_file.h"
#include "nn/layer_config.h"
#include "nn/moe_layer_config.h"

namespace mumoe::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double cp_layer_multiply_adds(const nn::LayerConfig& c, int64_t input, int64_t output) {
  const int64_t experts = std::accumulate(c.expert_dims.begin(), c.expert_dims.end(), int64_t{0});
  return static_cast<double>(c.cp_rank) * static_cast<double>(experts + input + (c.use_bias ? 1 : 0) + output);
}

double tr_layer_multiply_adds(const nn::LayerConfig& c, int64_t input, int64_t output) {
  // Cores: one per expert mode, then input and output; core k is [R_k, dim_k, R_{k+1}].
  std::vector<int64_t> dims = c.expert_dims;
  dims.push_back(input + (c.use_bias ? 1 : 0));
  dims.push_back(output);
  const auto& r = c.tr_ranks;
  const size_t cores = dims.size();
  double total = 0;
  for (size_t k = 0; k < cores; ++k) {
    const double rk = static_cast<double>(r[k % r.size()]), rn = static_cast<double>(r[(k + 1) % r.size()]);
    total += rk * static_cast<double>(dims[k]) * rn;                      // the core against its vector
    if (k > 0 && k + 1 < cores) total += static_cast<double>(r[0]) * rk * rn;  // chaining it on
  }
  return total;
}

double mumoe_multiply_adds(const nn::LayerConfig& c) {
  const int64_t experts = std::accumulate(c.expert_dims.begin(), c.expert_dims.end(), int64_t{0});
  double total = static_cast<double>(c.input_dim) * static_cast<double>(experts);  // gating
  auto one = [&](int64_t input, int64_t output) {
    return c.factorization == nn::Factorization::CP ? cp_layer_multiply_adds(c, input, output)
                                                    : tr_layer_multiply_adds(c, input, output);
  };
  total += one(c.input_dim, c.output_dim);
  if (c.is_block()) total += one(c.output_dim, c.second_dim);
  return total;
}

double router_multiply_adds(const nn::MoELayerConfig& c, int64_t tokens_per_input) {
  const double in = static_cast<double>(c.input_dim), out = static_cast<double>(c.output_dim);
  const double expert = c.hidden_dim > 0 ? in * static_cast<double>(c.hidden_dim) + static_cast<double>(c.hidden_dim) * out
                                         : in * out;
  const double slots = static_cast<double>(c.experts * c.slots_per_expert);
  if (c.router == nn::RouterKind::SoftMoE)
    return in * slots + slots * expert / static_cast<double>(std::max<int64_t>(1, tokens_per_input)) + slots * (in + out);
  const double per_sample = nn::is_token_choice(c.router) ? c.capacity_factor * static_cast<double>(c.k) : c.capacity_factor;
  return in * static_cast<double>(c.experts) + per_sample * expert;
}

/// Purity, I(E;Y)/H(Y) and load CV from a mode's statistics (dead experts come from every row:
/// LayerAnalysis::row_coverage).
void fill_specialisation(const ModeStatistics& statistics, LayerComparison& row) {
  double purity_sum = 0;
  int64_t strongest_for_some = 0;
  std::vector<double> strongest_counts;
  for (const auto& counts : statistics.expert_class_counts) {
    const auto total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    strongest_counts.push_back(static_cast<double>(total));
    if (total == 0) continue;
    purity_sum += static_cast<double>(*std::max_element(counts.begin(), counts.end())) / static_cast<double>(total);
    ++strongest_for_some;
  }
  row.mean_class_purity = strongest_for_some ? purity_sum / static_cast<double>(strongest_for_some) : kNaN;
  row.information_ratio =
      statistics.class_entropy_bits > 0 ? statistics.mutual_information_bits / statistics.class_entropy_bits : kNaN;
  const double mean = std::accumulate(strongest_counts.begin(), strongest_counts.end(), 0.0) /
                      static_cast<double>(std::max<size_t>(1, strongest_counts.size()));
  double variance = 0;
  for (const double c : strongest_counts) variance += (c - mean) * (c - mean);
  variance /= static_cast<double>(std::max<size_t>(1, strongest_counts.size()));
  row.load_cv = mean > 0 ? std::sqrt(variance) / mean : kNaN;
}


}  // namespace

double layer_multiply_adds(const model::ModelLayer& layer, int64_t tokens_per_input) {
  return layer.is_router() ? router_multiply_adds(*layer.router, tokens_per_input) : mumoe_multiply_adds(layer.config);
}

LayerComparison compare_layer(const SessionOptions& options, const ComparisonCallback& progress) {
  const auto start = std::chrono::steady_clock::now();
  // Purity and I(E;Y)/H(Y) measure how an expert's samples spread over one class each; checked
  // from the file's header, before its data is read or extracted.
  if (model::ModelFile::load(options.model_path, options.overrides).manifest().task == model::kMultiLabel)
    throw UsageError(options.model_path + " is a multi-label model: compare measures the class specialisation of "
                     "multi-class classifiers; its experts are analysed per output by stats, gallery and ablate");
  // Through the one entry point, whatever the layer's place: the sweep is then the cached one (a
  // merged sweep shard's too).
  ExtractionSummary extraction;
  auto analysis = LayerAnalysis::open(
      options, {},
      [&](const ExtractionProgress& p) {
        return !progress || progress("Reading samples", p.samples_done, p.samples_total, p.eta_seconds);
      },
      {}, &extraction);
  const auto layer = analysis->manifest_layer();
  LayerComparison row;
  row.model_path = options.model_path;
  row.data_spec = options.data_spec;
  row.layer = analysis->layer_name();
  row.family = layer.family();
  row.gate = layer.is_router() ? nn::to_string(layer.router->router) : nn::to_string(layer.config.gate_activation);
  row.experts = layer.experts();
  row.parameters = layer.parameter_count();
  row.samples = analysis->samples();
  // Rows per sample the layer processes: a head's one, a backbone layer's tokens (or a Mixer's
  // token mixing's channels).
  const int64_t rows_per_sample = analysis->rows_per_sample();
  row.tokens = row.samples * rows_per_sample;
  row.accuracy = analysis->accuracy().overall;

  const auto sweep = analysis->sweep(0, AblationMethod::Sparse, [&](int64_t done, int64_t total) {
    return !progress || progress("Sweep", done, total, 0);
  });
  row.mean_polysemanticity = sweep.value.mean_polysemanticity;
  row.experts_with_effect = sweep.value.experts_with_effect;
  row.from_cache = sweep.from_cache && extraction.chunks_computed == 0;

  fill_specialisation(analysis->statistics(0, 0.5).value, row);
  // Dead experts and dropped tokens over every row (statistics see a backbone layer's images by
  // their strongest patch).
  const auto coverage = analysis->row_coverage();
  row.dead_experts = std::count(coverage.rows_per_expert.begin(), coverage.rows_per_expert.end(), int64_t{0});
  row.dropped_tokens = coverage.rows_without_expert;

  row.multiply_adds_per_sample = layer_multiply_adds(layer, rows_per_sample);
  row.microseconds_per_sample = analysis->microseconds_per_row();
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return row;
}

namespace {

double finite_or_nan(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : kNaN;
}

}  // namespace

nlohmann::json to_json(const LayerComparison& r) {
  return {{"model", r.model_path},
          {"data", r.data_spec},
          {"layer", r.layer},
          {"family", r.family},
          {"gate", r.gate},
          {"experts", r.experts},
          {"parameters", r.parameters},
          {"samples", r.samples},
          {"tokens", r.tokens},
          {"accuracy", r.accuracy},
          {"mean_polysemanticity", number_or_null(r.mean_polysemanticity)},
          {"experts_with_effect", r.experts_with_effect},
          {"mean_class_purity", number_or_null(r.mean_class_purity)},
          {"information_ratio", number_or_null(r.information_ratio)},
          {"load_cv", number_or_null(r.load_cv)},
          {"dead_experts", r.dead_experts},
          {"dropped_tokens", r.dropped_tokens},
          {"multiply_adds_per_sample", r.multiply_adds_per_sample},
          {"flops_per_sample", 2 * r.multiply_adds_per_sample},
          {"microseconds_per_sample", number_or_null(r.microseconds_per_sample)},
          {"from_cache", r.from_cache},
          {"seconds", r.seconds}};
}

LayerComparison layer_comparison_from_json(const nlohmann::json& j) {
  LayerComparison r;
  r.model_path = j.at("model").get<std::string>();
  r.data_spec = j.at("data").get<std::string>();
  r.layer = j.at("layer").get<std::string>();
  r.family = j.at("family").get<std::string>();
  r.gate = j.at("gate").get<std::string>();
  r.experts = j.at("experts").get<int64_t>();
  r.parameters = j.at("parameters").get<int64_t>();
  r.samples = j.at("samples").get<int64_t>();
  r.tokens = j.value("tokens", r.samples);
  r.accuracy = j.at("accuracy").get<double>();
  r.mean_polysemanticity = finite_or_nan(j, "mean_polysemanticity");
  r.experts_with_effect = j.at("experts_with_effect").get<int64_t>();
  r.mean_class_purity = finite_or_nan(j, "mean_class_purity");
  r.information_ratio = finite_or_nan(j, "information_ratio");
  r.load_cv = finite_or_nan(j, "load_cv");
  r.dead_experts = j.at("dead_experts").get<int64_t>();
  r.dropped_tokens = j.at("dropped_tokens").get<int64_t>();
  r.multiply_adds_per_sample = j.at("multiply_adds_per_sample").get<double>();
  r.microseconds_per_sample = finite_or_nan(j, "microseconds_per_sample");
  r.from_cache = j.value("from_cache", false);
  r.seconds = j.value("seconds", 0.0);
  return r;
}

}  // namespace mumoe::analysis
