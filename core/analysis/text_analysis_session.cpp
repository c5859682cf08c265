#include "analysis/text_analysis_session.h"

#include <torch/torch.h>

#include <chrono>
#include <optional>

#include "analysis/lm_ablation.h"
#include "analysis/lm_forward.h"
#include "analysis/lm_steered_generation.h"
#include "analysis/stored_answer.h"
#include "analysis/sweep_shards.h"
#include "analysis/token_extraction.h"
#include "io/errors.h"
#include "model/gpt_file.h"
#include "model/model_summary.h"

namespace mumoe::analysis {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool looks_like_gpt(const model::ModelFile& file) { return model::model_kind(file) == model::ModelKind::Gpt; }

}  // namespace

bool is_gpt_model_file(const std::string& model_path) { return looks_like_gpt(model::ModelFile::load(model_path)); }

struct TextAnalysisSession::Impl {
  TextSessionOptions options;
  SessionRun stored;
  std::optional<nn::MuMoEGpt> gpt;
  int64_t layer = 0;
  std::string layer_name;
  LmEvalSet set;
  TokenExtractionOptions extraction;
  std::optional<RunData> run;
  std::unique_ptr<LmAblation> engine;
  std::shared_ptr<const text::Tokenizer> tokenizer;  ///< the model's (TextSessionOptions::tokenizer)

  int64_t complete_run_id() const {
    return stored.complete_run_id("token analysis", options.model_path, options.data_spec);
  }
  // Answers are stored under the extraction's run; the run row exists (partial or complete)
  // once begin_run has seen this key, which extraction does first.
  int64_t result_run_id() {
    if (auto id = stored.run_id()) return *id;
    return stored.cache->begin_run(stored.key, make_token_run_info(*gpt, set, extraction));
  }
  LmAblation& ablation(const SweepCallback& progress) {
    if (!engine) engine = std::make_unique<LmAblation>(*gpt, set, layer, options.device, progress);
    return *engine;
  }
};

TextAnalysisSession::TextAnalysisSession(std::unique_ptr<Impl> impl)
    : CachedSession(impl->stored), impl_(std::move(impl)) {}
TextAnalysisSession::~TextAnalysisSession() = default;

std::unique_ptr<TextAnalysisSession> TextAnalysisSession::open(const TextSessionOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const auto file = model::ModelFile::load(options.model_path);
  if (!looks_like_gpt(file)) throw UsageError(options.model_path + " is not a GPT");
  const auto& m = file.manifest();
  impl->gpt = model::load_gpt(file, options.n_head);
  auto& gpt = *impl->gpt;
  impl->tokenizer = model::open_gpt_tokenizer(file, gpt->config().vocab_size, options.tokenizer);
  gpt->set_sampled_vocabulary(impl->tokenizer->vocab_size());
  if (options.layer.empty() && gpt->n_layer() > 1)
    throw UsageError("the GPT has " + std::to_string(gpt->n_layer()) +
                     " MLP layers: name one with --layer (0 … " + std::to_string(gpt->n_layer() - 1) + ", or " +
                     nn::gpt_mlp_layer_name(gpt->config(), 0) + " … " +
                     nn::gpt_mlp_layer_name(gpt->config(), gpt->n_layer() - 1) + ")");
  impl->layer = options.layer.empty() ? 0 : gpt_layer_index(options.layer, gpt->n_layer());
  if (gpt->config().has_dense_mlp(impl->layer))
    throw UsageError("layer " + std::to_string(impl->layer) + " of " + options.model_path +
                     " has a plain MLP: it has no experts to analyse; choose a μMoE layer");
  impl->layer_name = nn::gpt_mlp_layer_name(gpt->config(), impl->layer);
  const auto split = training_split(m.provenance, options.validation_fraction);
  impl->set = load_lm_eval_set(options.data_spec, split.validation_fraction, split.seed, gpt->config().block_size,
                               options.max_sequences, impl->tokenizer);
  impl->extraction.sequences_per_chunk = options.sequences_per_chunk;
  impl->extraction.batching = options.chunk_batching;
  impl->extraction.device = options.device;
  impl->stored.open(options.cache_path,
                    make_token_run_key(options.model_path, gpt->config(), impl->set, impl->layer, impl->extraction));
  return std::unique_ptr<TextAnalysisSession>(new TextAnalysisSession(std::move(impl)));
}

std::unique_ptr<TextAnalysisSession> TextAnalysisSession::open_extracted(const TextSessionOptions& options, const ExtractionCallback& progress,
                                                   ExtractionSummary* summary, const OpenSteps& steps) {
  return open_then_extract<TextAnalysisSession>(options, progress, summary, steps);
}


const TextSessionOptions& TextAnalysisSession::options() const { return impl_->options; }
const std::string& TextAnalysisSession::layer_name() const { return impl_->layer_name; }
int64_t TextAnalysisSession::layer_index() const { return impl_->layer; }
int64_t TextAnalysisSession::expert_count() const { return (*impl_->gpt)->config().experts; }
const LmEvalSet& TextAnalysisSession::eval_set() const { return impl_->set; }

ExtractionSummary TextAnalysisSession::extract(const ExtractionCallback& progress) {
  if (auto done = impl_->stored.already_extracted()) return *done;
  impl_->run.reset();
  return extract_token_run(*impl_->stored.cache, impl_->stored.key, *impl_->gpt, impl_->set, impl_->layer, impl_->extraction,
                           progress);
}

const RunData& TextAnalysisSession::run() {
  if (!impl_->run) impl_->run = load_run_data(*impl_->stored.cache, impl_->complete_run_id());
  return *impl_->run;
}

cache::CacheCheckReport TextAnalysisSession::recompute() {
  impl_->run.reset();
  return impl_->stored.repair_for_recompute();
}

Answer<TokenGallery> TextAnalysisSession::gallery(const GalleryRequest& request, int64_t context_radius) {
  const auto key = request.key() + ":c" + std::to_string(context_radius);
  return cached_answer(*impl_->stored.cache, impl_->complete_run_id(), "token-gallery", key, false,
                       [](const nlohmann::json& j) { return token_gallery_from_json(j); },
                       [&] { return select_token_gallery(run(), impl_->set, request, context_radius); });
}

Answer<LmAblationReport> TextAnalysisSession::ablate(const std::vector<int64_t>& experts, AblationMethod method,
                                                     bool recompute, const SweepCallback& progress) {
  std::string key;
  for (size_t i = 0; i < experts.size(); ++i) key += (i ? "," : "") + std::to_string(experts[i]);
  key += ":" + to_string(method);
  return cached_answer(*impl_->stored.cache, impl_->result_run_id(), "lm-ablation", key, recompute,
                       [](const nlohmann::json& j) { return lm_ablation_report_from_json(j); },
                       [&] { return impl_->ablation(progress).ablate(experts, method); });
}

Answer<LmAblationReport> TextAnalysisSession::sweep(AblationMethod method, const SweepCallback& progress,
                                                   bool recompute) {
  return cached_answer(*impl_->stored.cache, impl_->result_run_id(), "lm-sweep", to_string(method), recompute,
                       [](const nlohmann::json& j) { return lm_ablation_report_from_json(j); },
                       [&] { return impl_->ablation({}).sweep(method, progress); });
}

Answer<LmAblationReport> TextAnalysisSession::sweep_shard(AblationMethod method, int64_t k, int64_t n,
                                                         const SweepCallback& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto& engine = impl_->ablation({});
  const auto experts = engine.experts();
  Answer<LmAblationReport> answer{engine.sweep(method, progress, shard_experts(experts, k, n)), false, 0};
  put_sweep_part(*impl_->stored.cache, impl_->result_run_id(), "lm-sweep", to_string(method), k, n, experts,
                 to_json(answer.value));
  answer.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return answer;
}

ModeStatistics TextAnalysisSession::statistics(double threshold) {
  return expert_statistics(run(), 0, impl_->gpt.value()->config().vocab_size, threshold);
}

SteeringVector TextAnalysisSession::steering_vector(int64_t expert, const CentreOptions& options) {
  return compute_steering_vector(run(), impl_->layer, expert, options);
}

SteeringResult TextAnalysisSession::steer(const SteeringRequest& request,
                                          const std::function<bool(int64_t, int64_t)>& progress) {
  const auto start = Clock::now();
  auto result = steer_generation(*impl_->gpt, steering_vector(request.expert, request.centre), request,
                                 *impl_->tokenizer, progress);
  result.layer_name = impl_->layer_name;
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace mumoe::analysis
