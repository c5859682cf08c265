#include "editing/bias_session.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "analysis/content_hash.h"
#include "cache/analysis_cache.h"
#include "data/dataset.h"
#include "editing/bias_report.h"
#include "editing/bias_study.h"
#include "editing/cached_bias_study.h"
#include "editing/edit_session_store.h"
#include "editing/model_export.h"
#include "io/errors.h"
#include "model/classifier_model.h"
#include "model/manifest.h"
#include "model/model_file.h"

namespace mumoe::editing {

namespace fs = std::filesystem;

ModelKind probe_model_kind(const std::string& model_path) { return model::model_kind(model::ModelFile::load(model_path)); }

std::string default_session_db(const std::string& cache_path) {
  const fs::path cache = cache_path.empty() ? fs::path(cache::default_cache_path()) : fs::absolute(cache_path);
  return (cache.parent_path() / "edits.sqlite").string();
}

struct BiasSession::Impl {
  BiasSessionOptions options;
  std::optional<BiasStudy> study;
  std::string hash;
  std::string db_path;
  std::unique_ptr<EditSessionStore> store;
  EditStack stack;
};

BiasSession::BiasSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BiasSession::~BiasSession() = default;

std::unique_ptr<BiasSession> BiasSession::open(const BiasSessionOptions& options, const BiasProgress& progress) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  {
    const auto file = model::ModelFile::load(options.model_path);
    if (file.manifest().task != model::kMultiLabel)
      throw UsageError(options.model_path + " is a multi-class model: bias correction works on multi-label models "
                       "(one binary output per attribute)");
  }
  auto test = data::load_dataset(options.test_spec);
  auto train = data::load_dataset(options.train_spec);
  // Edits for the session database first: a broken database fails fast, before the slow study.
  impl->db_path = options.session_db;
  if (impl->db_path.empty()) impl->db_path = default_session_db(options.cache_path);
  if (const auto dir = fs::path(impl->db_path).parent_path(); !dir.empty()) fs::create_directories(dir);
  impl->store = EditSessionStore::open(impl->db_path);
  impl->hash = analysis::hash_file(options.model_path);
  if (auto stored = impl->store->load(impl->hash)) impl->stack = stored->stack;
  impl->study.emplace(open_cached_bias_study(options.model_path, std::move(train), std::move(test), options.cache_path,
                                             options.device, progress));
  return std::unique_ptr<BiasSession>(new BiasSession(std::move(impl)));
}

const BiasSessionOptions& BiasSession::options() const { return impl_->options; }
const std::string& BiasSession::model_hash() const { return impl_->hash; }
const std::string& BiasSession::session_db_path() const { return impl_->db_path; }
const std::string& BiasSession::layer_name() const { return impl_->study->model().layer_name(); }
std::vector<std::string> BiasSession::target_names() const { return impl_->study->target_names(); }
std::vector<std::string> BiasSession::attribute_names() const { return impl_->study->test().attribute_names; }
int64_t BiasSession::expert_count() const { return impl_->study->test().coefficients.size(1); }
int64_t BiasSession::train_samples() const {
  const auto& t = impl_->study->train().coefficients;
  return t.defined() ? t.size(0) : 0;
}
int64_t BiasSession::test_samples() const { return impl_->study->test().coefficients.size(0); }

LogitEdit BiasSession::propose(const BiasTask& task, std::optional<double> lambda, bool blind) const {
  return impl_->study->make_edit(task, lambda, blind);
}

VariantMetrics BiasSession::evaluate(const BiasTask& task, const std::vector<LogitEdit>& edits) const {
  const auto& study = *impl_->study;
  study.output_index(task.target);
  return study.measure(task, edited_model_name(edits.size()),
                       edits.empty() ? study.test().logits : study.edited_test_logits(edits));
}

RewriteComparison BiasSession::preview(const BiasTask& task, std::optional<double> lambda) const {
  const auto& study = *impl_->study;
  // One proposal serves both: ā does not depend on λ, and the proposed λ is reported even when
  // the caller's λ is evaluated.
  auto edit = study.make_edit(task);
  const double proposed = edit.lambda;
  if (lambda) edit.lambda = *lambda;
  auto c = compare_rewrite(study, task, impl_->stack.applied(), edit);
  c.proposed_lambda = proposed;
  return c;
}

VariantMetrics BiasSession::blind_threshold(const BiasTask& task) const {
  const auto& study = *impl_->study;
  const auto applied = impl_->stack.applied();
  return blind_threshold_baseline(study, task, applied, evaluate(task, applied));
}

BiasTask BiasSession::worst_cell_task(const std::vector<LogitEdit>& edits) const {
  const auto outputs = target_names();
  const auto attributes = attribute_names();
  auto isOutput = [&](const std::string& a) { return std::find(outputs.begin(), outputs.end(), a) != outputs.end(); };
  std::vector<std::string> sensitive;
  for (const auto& a : attributes)
    if (!isOutput(a)) sensitive.push_back(a);
  if (sensitive.empty()) sensitive = attributes;

  // The edited logits once for every pair; only the four-cell table is needed per pair.
  const auto& study = *impl_->study;
  const auto logits = edits.empty() ? study.test().logits : study.edited_test_logits(edits);
  std::optional<BiasTask> worst;
  double worstAccuracy = 2;
  for (const auto& o : outputs) {
    for (const auto& s : sensitive) {
      if (s == o) continue;
      // Any cell of (o, s) gives the same four-cell table; the first one stands for the pair.
      const auto report = study.fairness(cell_task(o, 1, s, 1), logits);
      const auto cell = worst_cell(report);
      if (!cell || report.cell_accuracy(cell->first, cell->second) >= worstAccuracy) continue;
      worstAccuracy = report.cell_accuracy(cell->first, cell->second);
      worst = cell_task(o, cell->first, s, cell->second);
    }
  }
  if (!worst) throw UsageError("no output of the model has a sensitive attribute with test samples in its cells");
  return *worst;
}

VariantMetrics BiasSession::oversample(const BiasTask& task, const OversampleOptions& options,
                                       int64_t* repeat_factor) const {
  return oversample_baseline(*impl_->study, task, options, evaluate(task, impl_->stack.applied()), repeat_factor);
}

report::ExpertReport BiasSession::report(const BiasTask& task, const BiasReportRequest& request) const {
  return make_bias_report(*impl_->study, task, impl_->stack.applied(), request);
}

const EditStack& BiasSession::stack() const { return impl_->stack; }

void BiasSession::save() { impl_->store->save(impl_->hash, impl_->options.model_path, impl_->stack); }

void BiasSession::change_stack(const std::function<void(EditStack&)>& change) {
  auto previous = impl_->stack;
  change(impl_->stack);
  try {
    save();
  } catch (...) {
    impl_->stack = std::move(previous);  // memory and database stay in step
    throw;
  }
}

void BiasSession::push(LogitEdit edit) { change_stack([&edit](EditStack& stack) { stack.push(std::move(edit)); }); }
void BiasSession::undo() { change_stack([](EditStack& stack) { stack.undo(); }); }
void BiasSession::redo() { change_stack([](EditStack& stack) { stack.redo(); }); }
void BiasSession::clear() { change_stack([](EditStack& stack) { stack.clear(); }); }

ExportReport BiasSession::export_model(const ExportRequest& request,
                                       const std::function<bool(uint64_t, uint64_t)>& progress) const {
  const auto source = model::ModelFile::load(impl_->options.model_path);
  auto verify_data = impl_->study->model().prepare(data::load_dataset(impl_->options.test_spec));
  return export_edited_model(source, impl_->stack.applied(), verify_data, request, progress);
}

}  // namespace mumoe::editing
