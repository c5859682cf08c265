#include "editing/bias_study.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "editing/logit_rewrite.h"
#include "io/errors.h"
#include "nn/device.h"
#include "train/classifier_training.h"

namespace mumoe::editing {
namespace {

constexpr int64_t kChunk = 500;

SplitArrays compute_split(model::ClassifierModel& model, const data::Dataset& data, const StudyProgress& progress,
                          int64_t done_before, int64_t total) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> inputs, coefficients, logits;
  const int64_t chunk = model.aligned_batch(kChunk);  // a router layer's whole routing groups
  for (int64_t b = 0; b < data.size(); b += chunk) {
    const int64_t e = std::min(data.size(), b + chunk);
    auto x = model.layer_inputs(data, b, e);
    auto out = model.forward_layer(x);
    inputs.push_back(x);
    coefficients.push_back(out.coefficients.at(0).to(torch::kFloat32));
    logits.push_back(out.output.to(torch::kFloat32));
    if (progress && !progress(done_before + e, total)) throw Cancelled();
  }
  SplitArrays s;
  s.inputs = torch::cat(inputs);
  s.coefficients = torch::cat(coefficients);
  s.logits = torch::cat(logits);
  s.targets = data.targets;
  s.attributes = data.attributes.contiguous();
  s.attribute_names = data.attribute_names;
  s.identity = data.identity;
  return s;
}

std::vector<uint8_t> column(const torch::Tensor& t, int64_t c) {
  const auto col = t.select(1, c).to(torch::kUInt8).contiguous();
  return {col.data_ptr<uint8_t>(), col.data_ptr<uint8_t>() + col.numel()};
}

int64_t attribute_column(const SplitArrays& s, const std::string& name) {
  const auto it = std::find(s.attribute_names.begin(), s.attribute_names.end(), name);
  if (it == s.attribute_names.end()) throw UsageError(s.identity + " has no attribute '" + name + "'");
  return static_cast<int64_t>(it - s.attribute_names.begin());
}

}  // namespace

std::optional<std::string> training_spec_for(const std::string& test_spec) {
  const std::string suffix = ":test";
  if (test_spec.size() <= suffix.size() ||
      test_spec.compare(test_spec.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  return test_spec.substr(0, test_spec.size() - suffix.size()) + ":train";
}

BiasTask cell_task(const std::string& target, int t, const std::string& sensitive, int s) {
  return make_bias_task(target, target + "=" + std::to_string(t) + "&" + sensitive + "=" + std::to_string(s), sensitive);
}

BiasTask make_bias_task(const std::string& target, const std::string& subpopulation, const std::string& sensitive) {
  BiasTask task;
  task.target = target;
  task.subpopulation = parse_subpopulation(subpopulation);
  task.sensitive = sensitive;
  if (task.sensitive.empty()) {
    for (const auto& c : task.subpopulation.conditions)
      if (c.attribute != target) {
        if (!task.sensitive.empty())
          throw UsageError("subpopulation '" + subpopulation +
                           "' names more than one attribute besides the target: say which is sensitive (--sensitive)");
        task.sensitive = c.attribute;
      }
    if (task.sensitive.empty())
      throw UsageError("subpopulation '" + subpopulation +
                       "' names no attribute besides the target: give the sensitive attribute (--sensitive)");
  }
  if (task.sensitive == target) throw UsageError("the sensitive attribute must differ from the target");
  return task;
}

void prepare_study_data(const model::ClassifierModel& model, const std::string& model_name, data::Dataset& train,
                        data::Dataset& test) {
  if (!model.multilabel())
    throw UsageError(model_name + " is a multi-class model: bias correction works on multi-label models (one "
                     "binary output per attribute)");
  if (train.size() > 0) {
    train = model.prepare(std::move(train));
    model.check_compatible(train);
  }
  test = model.prepare(std::move(test));
  model.check_compatible(test);
}

BiasStudy BiasStudy::create(model::ClassifierModel model, data::Dataset train, data::Dataset test,
                            const std::string& device, const StudyProgress& progress) {
  prepare_study_data(model, "this model", train, test);
  const bool with_train = train.size() > 0;
  // The layer runs on the CPU in float32 (what an exported model computes); the backbone may use
  // the GPU for the inputs.
  model.module().eval();
  model.backbone_to(nn::parse_device(device));
  BiasStudy study(std::move(model));
  const int64_t total = train.size() + test.size();
  if (with_train) study.train_ = compute_split(study.model_, train, progress, 0, total);
  study.test_ = compute_split(study.model_, test, progress, train.size(), total);
  study.model_.backbone_to(torch::kCPU);
  return study;
}

BiasStudy BiasStudy::from_arrays(model::ClassifierModel model, SplitArrays train, SplitArrays test) {
  if (!model.multilabel()) throw UsageError("bias correction works on multi-label models");
  const int64_t experts = model.expert_dims().at(0), outputs = model.class_count();
  for (const auto* s : {&train, &test}) {
    if (!s->coefficients.defined()) {
      if (s == &test) throw UsageError("a bias study needs the test split");
      continue;
    }
    const auto n = s->coefficients.size(0);
    if (s->coefficients.size(1) != experts || s->logits.size(1) != outputs || s->logits.size(0) != n ||
        s->targets.size(0) != n || s->attributes.size(0) != n || s->targets.size(1) != outputs)
      throw UsageError("bias study arrays of " + s->identity + " do not match the model's layer");
  }
  BiasStudy study(std::move(model));
  study.train_ = std::move(train);
  study.test_ = std::move(test);
  return study;
}

int64_t BiasStudy::output_index(const std::string& target) const {
  const auto& names = target_names();
  const auto it = std::find(names.begin(), names.end(), target);
  if (it == names.end()) {
    std::string have;
    for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
    throw UsageError("the model has no output '" + target + "' (its outputs: " + have + ")");
  }
  return static_cast<int64_t>(it - names.begin());
}

std::vector<uint8_t> BiasStudy::train_mask(const Subpopulation& subpopulation) const {
  if (!train_.attributes.defined())
    throw UsageError("this needs the training split (the subpopulation's mean coefficients come from it)");
  const auto columns = resolve_columns(subpopulation, train_.attribute_names, train_.identity);
  return subpopulation_mask(subpopulation, columns, train_.attributes.data_ptr<int64_t>(), train_.attributes.size(0),
                            train_.attributes.size(1));
}

LogitEdit BiasStudy::make_edit(const BiasTask& task, std::optional<double> lambda, bool blind) const {
  // A non-finite λ would be stored as null in an edit session, which then could not be read back
  // (issue 45): refused at the door.
  if (lambda && !std::isfinite(*lambda))
    throw UsageError("λ must be a finite number, not " + std::to_string(*lambda));
  LogitEdit e;
  e.layer = model_.layer_name();
  e.target = task.target;
  e.output = output_index(task.target);
  e.subpopulation = task.subpopulation.text();
  e.blind = blind;
  e.training_data = train_.identity;
  const auto mask = train_mask(task.subpopulation);
  const auto mask_t = torch::from_blob(const_cast<uint8_t*>(mask.data()), {static_cast<int64_t>(mask.size())},
                                       torch::kUInt8)
                          .to(torch::kBool);
  e.support = mask_t.sum().item<int64_t>();
  if (e.support == 0)
    throw UsageError("no training sample of " + train_.identity + " is in subpopulation '" + e.subpopulation + "'");
  const int64_t experts = train_.coefficients.size(1);
  if (blind) {
    e.mean_coefficients.assign(static_cast<size_t>(experts), 1.0);
  } else {
    const auto mean = train_.coefficients.index({mask_t}).to(torch::kFloat64).mean(0).contiguous();
    e.mean_coefficients.assign(mean.data_ptr<double>(), mean.data_ptr<double>() + experts);
  }
  if (lambda) {
    e.lambda = *lambda;
  } else {
    // Toward the under-predicted label: compare how often the subpopulation IS positive with how
    // often the model SAYS it is (training split).
    const auto truth = train_.targets.select(1, e.output).index({mask_t}).to(torch::kFloat64).mean().item<double>();
    const auto said =
        (train_.logits.select(1, e.output).index({mask_t}) > 0).to(torch::kFloat64).mean().item<double>();
    const double magnitude = blind ? 2.5 : static_cast<double>(experts);
    // Already predicted as often as it is positive: move toward the label the predicate names.
    const bool up = truth != said ? truth > said : task.subpopulation.value_of(task.target) != 0;
    e.lambda = up ? magnitude : -magnitude;
  }
  return e;
}

torch::Tensor BiasStudy::edited_test_logits(const std::vector<LogitEdit>& edits) const {
  check_edits(model_.expert_dims().at(0), model_.class_count(), edits);
  return apply_edits(test_.logits, test_.coefficients, edits);
}

FairnessReport BiasStudy::fairness(const BiasTask& task, const torch::Tensor& test_logits) const {
  const auto o = output_index(task.target);
  const auto s = attribute_column(test_, task.sensitive);
  const auto predicted = column((test_logits.select(1, o) > 0).unsqueeze(1), 0);
  const int64_t t_value = std::max<int64_t>(task.subpopulation.value_of(task.target), 0);
  const int64_t s_value = std::max<int64_t>(task.subpopulation.value_of(task.sensitive), 0);
  if (task.subpopulation.value_of(task.target) < 0 || task.subpopulation.value_of(task.sensitive) < 0)
    throw UsageError("subpopulation '" + task.subpopulation.text() + "' must fix both the target (" + task.target +
                     ") and the sensitive attribute (" + task.sensitive + ") to name a cell of the 4-way table");
  return fairness_report(predicted, column(test_.targets, o), column(test_.attributes, s), static_cast<int>(t_value),
                         static_cast<int>(s_value));
}

FairnessReport BiasStudy::fairness(const BiasTask& task, const std::vector<LogitEdit>& edits) const {
  return fairness(task, edits.empty() ? test_.logits : edited_test_logits(edits));
}

std::vector<double> BiasStudy::per_target_accuracy(const torch::Tensor& test_logits) const {
  const auto hits = ((test_logits > 0).to(torch::kLong) == test_.targets).to(torch::kFloat64).mean(0).contiguous();
  return {hits.data_ptr<double>(), hits.data_ptr<double>() + hits.numel()};
}

VariantMetrics BiasStudy::measure(const BiasTask& task, std::string name, const torch::Tensor& test_logits) const {
  VariantMetrics m;
  m.name = std::move(name);
  m.report = fairness(task, test_logits);
  m.per_target_accuracy = per_target_accuracy(test_logits);
  double sum = 0;
  for (const double a : m.per_target_accuracy) sum += a;
  if (!m.per_target_accuracy.empty()) m.test_accuracy = sum / static_cast<double>(m.per_target_accuracy.size());
  return m;
}

RewriteComparison compare_rewrite(const BiasStudy& study, const BiasTask& task, const std::vector<LogitEdit>& prior,
                                  const LogitEdit& edit) {
  study.output_index(task.target);  // the target must be an output of the model
  RewriteComparison c;
  c.edit = edit;
  c.proposed_lambda = edit.lambda;
  const auto before = prior.empty() ? study.test().logits : study.edited_test_logits(prior);
  c.before = study.measure(task, edited_model_name(prior.size()), before);
  // The new edit on top of before's logits: edits add in order, so this is the same tensor as
  // applying prior + edit afresh (the λ slider's path, without re-applying the prior edits).
  check_edits(study.model().expert_dims().at(0), study.model().class_count(), {edit});
  c.after = study.measure(task, edit.blind ? "blind threshold" : "expert rewrite",
                          apply_edits(before, study.test().coefficients, {edit}));
  measure_mrs_against(c.after, c.before);
  return c;
}

VariantMetrics blind_threshold_baseline(const BiasStudy& study, const BiasTask& task,
                                        const std::vector<LogitEdit>& prior, const VariantMetrics& before) {
  auto all = prior;
  all.push_back(study.make_edit(task, {}, /*blind=*/true));
  auto m = study.measure(task, "blind threshold", study.edited_test_logits(all));
  measure_mrs_against(m, before);
  return m;
}

VariantMetrics oversample_baseline(const BiasStudy& study, const BiasTask& task, const OversampleOptions& options,
                                   const VariantMetrics& before, int64_t* repeat_factor) {
  auto m = study.measure(task, "oversample", study.oversampled_test_logits(task, options, repeat_factor));
  measure_mrs_against(m, before);
  return m;
}

torch::Tensor BiasStudy::oversampled_test_logits(const BiasTask& task, const OversampleOptions& o,
                                                 int64_t* repeat_factor) const {
  const auto mask = train_mask(task.subpopulation);
  std::vector<int64_t> members, all;
  for (size_t i = 0; i < mask.size(); ++i) {
    all.push_back(static_cast<int64_t>(i));
    if (mask[i]) members.push_back(static_cast<int64_t>(i));
  }
  if (members.empty())
    throw UsageError("no training sample is in subpopulation '" + task.subpopulation.text() + "'");
  int64_t factor = o.factor;
  if (factor <= 0) {
    // Match the cell with the same target value and the other sensitive value.
    auto other = task.subpopulation;
    for (auto& c : other.conditions)
      if (c.attribute == task.sensitive) c.value = 1 - c.value;
    const auto other_mask = train_mask(other);
    const auto other_count = std::count(other_mask.begin(), other_mask.end(), uint8_t{1});
    factor = std::clamp<int64_t>((other_count + static_cast<int64_t>(members.size()) / 2) /
                                     static_cast<int64_t>(members.size()),
                                 1, 100);
  }
  if (repeat_factor) *repeat_factor = factor;
  for (int64_t r = 1; r < factor; ++r) all.insert(all.end(), members.begin(), members.end());
  const auto index = torch::tensor(all, torch::kLong);

  data::Dataset d;
  d.features = train_.inputs.index_select(0, index);
  d.labels = torch::zeros({index.size(0)}, torch::kLong);
  d.attributes = train_.attributes.index_select(0, index);
  d.attribute_names = train_.attribute_names;
  d.targets = train_.targets.index_select(0, index);
  d.target_names = target_names();
  d.identity = train_.identity + " (oversampled ×" + std::to_string(factor) + ")";

  torch::manual_seed(o.seed);
  // A fresh layer of the same kind and configuration (μMoE or router), trained on the inputs.
  auto head = model_.is_router()
                  ? model::ClassifierModel::from_router_layer(nn::MoELayer(model_.router_layer()->config()),
                                                              model_.layer_name(), target_names(), /*multilabel=*/true)
                  : model::ClassifierModel::from_layer(nn::MuMoEBlock(model_.layer()->config()), model_.layer_name(),
                                                       target_names(), /*multilabel=*/true);
  train::TrainOptions t;
  t.epochs = o.epochs;
  t.batch_size = o.batch_size;
  t.learning_rate = o.learning_rate;
  t.seed = o.seed;
  train::train_classifier(head, d, t, {}, {}, {});
  torch::NoGradGuard no_grad;
  head.module().eval();
  // All test rows in one pass: a router layer routes them in its groups from the first row, as
  // the study's own chunks (whole groups) did.
  return head.forward_layer(test_.inputs).output.to(torch::kFloat32);
}

}  // namespace mumoe::editing
