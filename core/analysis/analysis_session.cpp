#include "analysis/analysis_session.h"

#include <torch/torch.h>

#include <chrono>
#include <optional>

#include "analysis/counterfactual_ablation.h"
#include "analysis/extraction.h"
#include "analysis/result_json.h"
#include "analysis/router_ablation.h"
#include "analysis/stored_answer.h"
#include "analysis/sweep_shards.h"
#include "data/dataset.h"
#include "editing/subpopulation.h"
#include "io/errors.h"
#include "model/classifier_model.h"

namespace mumoe::analysis {
namespace {

std::string experts_key(int64_t mode, const std::vector<int64_t>& experts, AblationMethod method) {
  std::string key = "mode" + std::to_string(mode) + ":";
  for (size_t i = 0; i < experts.size(); ++i) key += (i ? "," : "") + std::to_string(experts[i]);
  return key + ":" + to_string(method);
}

}  // namespace

struct AnalysisSession::Impl {
  SessionOptions options;
  SessionRun stored;
  std::optional<model::ClassifierModel> model;
  data::Dataset data;
  ExtractionOptions extraction;
  std::optional<RunData> run;
  std::unique_ptr<CounterfactualAblation> ablation;
  std::unique_ptr<RouterAblation> router_ablation;  ///< instead of `ablation` for a router layer
  std::vector<std::string> class_names;
  /// A multi-label model: the attribute column of each output (RunData::multilabel); empty
  /// otherwise.
  std::vector<int64_t> target_columns;
  bool multilabel() const { return model->multilabel(); }
  /// The labels that chunks must hold: class indices of a multi-class model; a multi-label
  /// model's chunks keep the data's own labels (its truths are attribute columns), so only their
  /// predictions (argmax) are checked.
  std::string chunk_problem(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions,
                            int64_t first_sample) const {
    const auto classes = static_cast<int64_t>(class_names.size());
    return class_index_problem(multilabel() ? std::vector<int64_t>() : labels, predictions, classes, first_sample);
  }
  mutable std::optional<data::Dataset> gallery_images;  ///< loaded on first use

  // The data set that holds the gallery's images: the analysed data itself, or its image twin.
  const data::Dataset& image_data() const {
    if (data.has_images()) return data;
    if (!gallery_images) {
      auto images = data::load_dataset(options.gallery_images);
      if (!images.has_images()) throw UsageError(options.gallery_images + " holds no images");
      if (images.size() != data.size() || !torch::equal(images.labels, data.labels))
        throw UsageError(options.gallery_images + " is not the image set of " + data.identity + " (" +
                         std::to_string(images.size()) + " vs " + std::to_string(data.size()) +
                         " samples, or different labels)");
      gallery_images = std::move(images);
    }
    return *gallery_images;
  }

  int64_t complete_run_id() const {
    return stored.complete_run_id("analysis", options.model_path, options.data_spec, " (`mumoe analyze`)");
  }
  CounterfactualAblation& engine(const RunData& r) {
    if (!ablation)
      ablation = std::make_unique<CounterfactualAblation>(model->layer(), r, model->class_count(), options.device);
    return *ablation;
  }
  RouterAblation& router_engine(const RunData& r) {
    if (!router_ablation)
      router_ablation = std::make_unique<RouterAblation>(model->router_layer(), r, model->class_count(), options.device);
    return *router_ablation;
  }
  void drop_engines() {
    ablation.reset();
    router_ablation.reset();
  }
};

AnalysisSession::AnalysisSession(std::unique_ptr<Impl> impl) : CachedSession(impl->stored), impl_(std::move(impl)) {}
AnalysisSession::~AnalysisSession() = default;

std::unique_ptr<AnalysisSession> AnalysisSession::open(const SessionOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->extraction.chunk_size = options.chunk_size;
  impl->extraction.device = options.device;
  impl->extraction.arithmetic = options.extraction_arithmetic;
  impl->extraction.batching = options.chunk_batching;
  const auto file = model::ModelFile::load(options.model_path, options.overrides);
  impl->model = model::ClassifierModel::load(file, options.layer);
  impl->data = data::load_dataset(options.data_spec);
  if (impl->model->multilabel()) {
    // Each output is read against the data's attribute of its name (UsageError naming a missing
    // one); accuracy, ablation and statistics are then per output (RunData::multilabel).
    if (impl->model->is_router())
      throw UsageError(options.model_path + " is a multi-label router model: its expert analysis is not supported");
    if (impl->model->class_count() > kMaxMultilabelOutputs)
      throw UsageError(options.model_path + " has " + std::to_string(impl->model->class_count()) +
                       " outputs: the expert analysis of a multi-label model holds at most " +
                       std::to_string(kMaxMultilabelOutputs));
    impl->data = impl->model->prepare(std::move(impl->data));
    for (const auto& name : impl->model->label_names()) {
      const auto& names = impl->data.attribute_names;
      impl->target_columns.push_back(std::find(names.begin(), names.end(), name) - names.begin());
    }
  }
  impl->model->check_compatible(impl->data);
  impl->class_names = impl->model->label_names().empty() ? impl->data.class_names : impl->model->label_names();
  // Classes the data never shows still have an output: name them by index.
  while (static_cast<int64_t>(impl->class_names.size()) < impl->model->class_count())
    impl->class_names.push_back(std::to_string(impl->class_names.size()));
  impl->stored.open(options.cache_path, make_run_key(options.model_path, *impl->model, impl->data, impl->extraction));
  return std::unique_ptr<AnalysisSession>(new AnalysisSession(std::move(impl)));
}

std::unique_ptr<AnalysisSession> AnalysisSession::open_extracted(const SessionOptions& options, const ExtractionCallback& progress,
                                                   ExtractionSummary* summary, const OpenSteps& steps) {
  return open_then_extract<AnalysisSession>(options, progress, summary, steps);
}


const SessionOptions& AnalysisSession::options() const { return impl_->options; }
const std::string& AnalysisSession::layer_name() const { return impl_->model->layer_name(); }
const std::vector<std::string>& AnalysisSession::class_names() const { return impl_->class_names; }
const std::vector<std::string>& AnalysisSession::attribute_names() const { return impl_->data.attribute_names; }
bool AnalysisSession::multilabel() const { return impl_->multilabel(); }
std::vector<int64_t> AnalysisSession::expert_dims() const { return impl_->model->expert_dims(); }
std::string AnalysisSession::layer_family() const { return impl_->model->layer_family(); }
const model::ClassifierModel& AnalysisSession::model() const { return *impl_->model; }
int64_t AnalysisSession::sample_count() const { return impl_->data.size(); }
bool AnalysisSession::has_images() const { return impl_->data.has_images(); }

ExtractionSummary AnalysisSession::extract(const ExtractionCallback& progress) {
  if (auto done = impl_->stored.already_extracted()) return *done;
  impl_->run.reset();
  impl_->drop_engines();
  return extract_run(*impl_->stored.cache, impl_->stored.key, *impl_->model, impl_->data, impl_->extraction, progress);
}

const RunData& AnalysisSession::run() {
  if (!impl_->run) {
    const auto id = impl_->complete_run_id();
    auto data = load_extracted_run(*impl_->stored.cache, id, *impl_->model, impl_->data);
    if (auto problem = impl_->chunk_problem(data.labels, data.predictions, 0); !problem.empty())
      throw cache::damaged_cache_error(impl_->stored.cache->path(), "run " + std::to_string(id) + ", " + problem);
    if (impl_->multilabel()) make_multilabel(data, impl_->target_columns);
    impl_->run = std::move(data);
  }
  return *impl_->run;
}

cache::CacheCheckReport AnalysisSession::recompute() {
  impl_->run.reset();
  impl_->drop_engines();
  // (A backbone run's chunk that lost its inputs is found by the check itself, from the run key;
  // coefficients left to the model that come out stale are extracted again by run() itself.)
  return impl_->stored.repair_for_recompute([this](const cache::ChunkRecord& c) {
    return impl_->chunk_problem(c.labels, c.predictions, c.first_sample);
  });
}

ClassAccuracy AnalysisSession::accuracy() {
  const auto& r = run();
  return accuracy_of(r.labels, r.predictions, static_cast<int64_t>(impl_->class_names.size()), r.multilabel);
}

Answer<ModeStatistics> AnalysisSession::statistics(int64_t mode, double threshold) {
  const std::string key = "mode" + std::to_string(mode) + ":t" + std::to_string(threshold);
  return cached_answer(*impl_->stored.cache, impl_->complete_run_id(), "statistics", key, false,
                       [](const nlohmann::json& j) { return mode_statistics_from_json(j); },
                       [&] { return expert_statistics(run(), mode, static_cast<int64_t>(impl_->class_names.size()), threshold); });
}

Answer<Gallery> AnalysisSession::gallery(const GalleryRequest& asked) {
  auto request = asked;  // one key per subpopulation however it was written
  if (!request.subpopulation.empty())
    request.subpopulation = editing::parse_subpopulation(request.subpopulation).text();
  return cached_answer(*impl_->stored.cache, impl_->complete_run_id(), "gallery", request.key(), false,
                       [](const nlohmann::json& j) { return gallery_from_json(j); },
                       [&] {
                         const auto& r = run();
                         const auto members = request.subpopulation.empty()
                                                  ? std::vector<uint8_t>()
                                                  : subpopulation_members(r, impl_->data.attribute_names,
                                                                          request.subpopulation, impl_->data.identity);
                         return select_gallery(r, request, members);
                       });
}

Answer<AblationOutcome> AnalysisSession::ablate(int64_t mode, const std::vector<int64_t>& experts,
                                                AblationMethod method, bool recompute) {
  return cached_answer(*impl_->stored.cache, impl_->complete_run_id(), "ablation", experts_key(mode, experts, method), recompute,
                       [](const nlohmann::json& j) { return ablation_outcome_from_json(j); },
                       [&] {
                         return impl_->model->is_router() ? impl_->router_engine(run()).ablate(mode, experts, method)
                                                          : impl_->engine(run()).ablate(mode, experts, method);
                       });
}

Answer<SweepOutcome> AnalysisSession::sweep(int64_t mode, AblationMethod method, const SweepCallback& progress,
                                            bool recompute) {
  return cached_answer(*impl_->stored.cache, impl_->complete_run_id(), "sweep", sweep_answer_key(mode, method), recompute,
                       [](const nlohmann::json& j) { return sweep_outcome_from_json(j); },
                       [&] {
                         return impl_->model->is_router() ? impl_->router_engine(run()).sweep(mode, method, progress)
                                                          : impl_->engine(run()).sweep(mode, method, progress);
                       });
}

bool AnalysisSession::has_gallery_images() const {
  return impl_->data.has_images() || !impl_->options.gallery_images.empty();
}

SampleImage AnalysisSession::sample_image(int64_t sample) const {
  SampleImage image;
  if (!has_gallery_images()) return image;
  const auto& d = impl_->data;
  if (sample < 0 || sample >= d.size())
    throw UsageError("sample " + std::to_string(sample) + " does not exist (0–" + std::to_string(d.size() - 1) + ")");
  auto chw = impl_->image_data().image(sample);
  constexpr int64_t kLargestTile = 224;
  if (chw.size(1) != chw.size(2) || chw.size(1) > kLargestTile) {
    // A photo of any size (a streamed folder): its centre square, area-averaged down to at most
    // 224 px, like the model's centre crop — contact sheets and the GUI show square tiles.
    const auto side = std::min(chw.size(1), chw.size(2));
    const auto square = chw.narrow(1, (chw.size(1) - side) / 2, side).narrow(2, (chw.size(2) - side) / 2, side);
    const auto target = std::min(side, kLargestTile);
    chw = torch::nn::functional::interpolate(
              square.unsqueeze(0).to(torch::kFloat32),
              torch::nn::functional::InterpolateFuncOptions().size(std::vector<int64_t>{target, target}).mode(torch::kArea))
              .squeeze(0)
              .round()
              .clamp(0, 255)
              .to(torch::kUInt8);
  }
  const auto hwc = chw.permute({1, 2, 0}).contiguous();
  image.height = hwc.size(0);
  image.width = hwc.size(1);
  image.channels = hwc.size(2);
  image.pixels.assign(hwc.data_ptr<uint8_t>(), hwc.data_ptr<uint8_t>() + hwc.numel());
  return image;
}

}  // namespace mumoe::analysis
