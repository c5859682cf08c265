#include "editing/cached_bias_study.h"

#include <torch/torch.h>

#include "analysis/extraction.h"
#include "analysis/run_data.h"
#include "cache/analysis_cache.h"
#include "io/errors.h"
#include "model/model_file.h"

namespace mumoe::editing {
namespace {

// One split through the cache: extract what is missing, then read the run back as tensors.
SplitArrays cached_split(cache::AnalysisCache& cache, const std::string& model_path, model::ClassifierModel& model,
                         const data::Dataset& data, const std::string& device, const StudyProgress& progress,
                         int64_t done_before, int64_t total) {
  analysis::ExtractionOptions options;
  options.device = device;
  const auto key = analysis::make_run_key(model_path, model, data, options);
  analysis::extract_run(cache, key, model, data, options, [&](const analysis::ExtractionProgress& p) {
    return !progress || progress(done_before + p.samples_done, total);
  });
  const auto run = analysis::load_extracted_run(cache, *cache.find_run(key), model, data);
  const int64_t n = run.samples();
  if (n != data.size()) throw Error("the cached run of " + data.identity + " has " + std::to_string(n) + " samples");
  const int64_t experts = run.info.expert_dims.at(0);
  const int64_t outputs = static_cast<int64_t>(run.scores.size()) / std::max<int64_t>(n, 1);
  const int64_t width = static_cast<int64_t>(run.inputs.size()) / std::max<int64_t>(n, 1);

  SplitArrays s;
  s.inputs = torch::from_blob(const_cast<float*>(run.inputs.data()), {n, width}, torch::kFloat32).clone();
  s.logits = torch::from_blob(const_cast<double*>(run.scores.data()), {n, outputs}, torch::kFloat64)
                 .to(torch::kFloat32);
  s.coefficients = torch::zeros({n, experts}, torch::kFloat32);
  auto dense = s.coefficients.accessor<float, 2>();
  const auto& rows = run.coefficients.at(0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = rows.offsets[i]; k < rows.offsets[i + 1]; ++k)
      dense[i][rows.indices[k]] = static_cast<float>(rows.values[k]);
  s.targets = data.targets;
  s.attributes = data.attributes.contiguous();
  s.attribute_names = data.attribute_names;
  s.identity = data.identity;
  return s;
}

}  // namespace

BiasStudy open_cached_bias_study(const std::string& model_path, data::Dataset train, data::Dataset test,
                                 const std::string& cache_path, const std::string& device,
                                 const StudyProgress& progress) {
  const auto file = model::ModelFile::load(model_path);
  auto model = model::ClassifierModel::load(file);
  prepare_study_data(model, model_path, train, test);
  const bool with_train = train.size() > 0;
  auto cache = cache::AnalysisCache::open(cache_path.empty() ? cache::default_cache_path() : cache_path);
  const int64_t total = train.size() + test.size();
  SplitArrays train_arrays;
  if (with_train) train_arrays = cached_split(*cache, model_path, model, train, device, progress, 0, total);
  auto test_arrays = cached_split(*cache, model_path, model, test, device, progress, train.size(), total);
  model.backbone_to(torch::kCPU);
  return BiasStudy::from_arrays(std::move(model), std::move(train_arrays), std::move(test_arrays));
}

}  // namespace mumoe::editing
