#include "analysis/expert_report.h"
#include "io/number_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <optional>
#include <sstream>

#include "analysis/gallery.h"
#include "io/atomic_file.h"
#include "io/output_files.h"
#include "analysis/lm_ablation_results.h"
#include "analysis/token_gallery.h"
#include "io/errors.h"
#include "model/model_summary.h"
#ifdef MUMOE_WITH_OPENCV
#include "analysis/contact_sheet.h"
#endif

namespace mumoe::analysis {
namespace {

std::string percent(double fraction) { return io::fixed_text(100 * fraction, 2) + " %"; }

std::string gallery_title(const Gallery& g) {
  std::ostringstream s;
  s << g.items.size() << (g.request.order == GalleryOrder::Top ? " with the largest a" : " random with a ≥ ");
  if (g.request.order != GalleryOrder::Top) {
    s << io::fixed_text(g.request.threshold, 2);
  }
  s << " of " << g.eligible << " eligible samples";
  return s.str();
}

// Counts the report's steps (the sweep's experts, then each detailed expert) for `progress`.
class Steps {
 public:
  Steps(const ReportProgress& progress, int64_t total) : progress_(progress), total_(total) {}
  void operator()() {
    ++done_;
    if (progress_ && !progress_(done_, total_)) throw Cancelled();
  }

 private:
  const ReportProgress& progress_;
  int64_t total_, done_ = 0;
};

std::string experts_line(const ModeStatistics& stats) {
  return std::to_string(stats.experts.size()) +
         (stats.dead_experts ? " (" + std::to_string(stats.dead_experts) + " dead)" : "");
}

// An expert's table row from its statistics; its ablation (if any) against `before`.
report::ExpertRow row_of(const ExpertSummary& s, const std::function<std::string(int64_t)>& class_name,
                         const AblationOutcome* ablated, double before) {
  report::ExpertRow row;
  row.expert = s.expert;
  row.load = s.load;
  row.support = s.support;
  row.mean_coefficient = s.mean_coefficient;
  for (const auto& [c, count] : s.top_classes) row.top_classes.push_back({class_name(c), count});
  if (ablated) {
    row.has_ablation = true;
    row.delta_accuracy = ablated->after.overall - before;
    row.polysemanticity = ablated->has_effect ? ablated->polysemanticity : std::nan("");
  }
  return row;
}

GalleryRequest gallery_request(int64_t mode, int64_t expert, const ReportRequest& request) {
  GalleryRequest g;
  g.mode = mode;
  g.expert = expert;
  g.threshold = request.threshold;
  g.count = request.images;
  return g;
}

}  // namespace

std::vector<int64_t> select_report_experts(const std::string& experts, const std::vector<int64_t>& loads) {
  const auto n = static_cast<int64_t>(loads.size());
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  if (experts == "all") return all;
  if (experts.rfind("top-", 0) == 0) {
    int64_t k = 0;
    try {
      size_t used = 0;
      k = std::stoll(experts.substr(4), &used);
      if (used != experts.size() - 4 || k < 1) throw std::invalid_argument("k");
    } catch (const std::exception&) {
      throw UsageError("--experts " + experts + ": top-K needs a positive K, e.g. top-16");
    }
    // The most loaded first; ties by index, so the choice is stable.
    std::stable_sort(all.begin(), all.end(), [&](int64_t a, int64_t b) { return loads[a] > loads[b]; });
    all.resize(static_cast<size_t>(std::min(k, n)));
    return all;
  }
  std::vector<int64_t> chosen;
  if (experts.empty() || experts.back() == ',')
    throw UsageError("--experts " + experts + ": expected all, top-K or a list of expert numbers like 3,7,12");
  std::stringstream list(experts);
  std::string item;
  while (std::getline(list, item, ',')) {
    size_t used = 0;
    int64_t e = -1;
    try {
      e = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isdigit(static_cast<unsigned char>(item.front())))
      throw UsageError("--experts " + experts + ": expected all, top-K or a list of expert numbers like 3,7,12");
    if (e < 0 || e >= n) throw UsageError("--experts: expert " + item + " does not exist (0 … " + std::to_string(n - 1) + ")");
    if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
  }
  if (chosen.empty()) throw UsageError("--experts is empty");
  return chosen;
}

report::ExpertReport make_expert_report(LayerAnalysis& analysis, const ReportRequest& request,
                                        const ReportProgress& progress) {
  const int64_t mode = 0;
  const auto stats = analysis.statistics(mode, request.threshold).value;
  std::vector<int64_t> loads;
  for (const auto& e : stats.experts) loads.push_back(e.load);
  const auto shown = select_report_experts(request.experts, loads);
  const auto accuracy = analysis.accuracy();
  const auto n = static_cast<int64_t>(stats.experts.size());
  Steps step(progress, (request.sweep ? n : 0) + static_cast<int64_t>(shown.size()));

  report::ExpertReport r;
  r.class_names = analysis.class_names();
  r.class_accuracy = accuracy.per_class;
  r.title = report::file_name(request.model_path);
  const auto summary = model::summarize_model_file(request.model_path, request.overrides);
  r.card = {{"model", request.model_path},
            {"architecture", summary.backbone.empty() ? summary.architecture : summary.architecture + ", " + summary.backbone},
            {"layer", analysis.layer_name()},
            {"experts", experts_line(stats)},
            {"data", request.data_spec},
            {"samples", std::to_string(analysis.samples())},
            {"accuracy", percent(accuracy.overall)},
            {"provenance", summary.provenance_json},
            {"made by", "mumoe-studio " + request.app_version},
            {"generated", request.generated_utc.empty() ? report::utc_now_text() : request.generated_utc}};

  std::vector<AblationOutcome> outcomes(static_cast<size_t>(n));
  std::vector<bool> ablated(static_cast<size_t>(n), false);
  if (request.sweep) {
    const auto sweep = analysis.sweep(mode, AblationMethod::Sparse, [&](int64_t, int64_t) {
      step();
      return true;
    });
    for (const auto& o : sweep.value.experts)
      if (!o.experts.empty() && o.experts.front() >= 0 && o.experts.front() < n) {
        outcomes[o.experts.front()] = o;
        ablated[o.experts.front()] = true;
      }
    r.has_sweep = true;
  }
  for (const auto e : shown)
    if (!ablated[e]) {
      outcomes[e] = analysis.ablate(mode, {e}, AblationMethod::Sparse).value;
      ablated[e] = true;
    }

  const auto class_name = [&](int64_t c) {
    return c >= 0 && c < static_cast<int64_t>(r.class_names.size()) ? r.class_names[c] : "class " + std::to_string(c);
  };
  for (int64_t e = 0; e < n; ++e)
    r.experts.push_back(row_of(stats.experts[e], class_name, ablated[e] ? &outcomes[e] : nullptr, accuracy.overall));

  for (const auto e : shown) {
    report::ExpertDetail d;
    d.expert = e;
    const auto gallery = analysis.gallery(gallery_request(mode, e, request)).value;
    d.gallery_title = gallery_title(gallery);
    for (const auto& item : gallery.items) {
      report::Tile t;
      t.label = label_text(item.label, r.class_names, gallery.multilabel);
      t.prediction = label_text(item.prediction, r.class_names, gallery.multilabel);
      t.coefficient = item.coefficient;
      t.outlined = item.patch >= 0;
#ifdef MUMOE_WITH_OPENCV
      t.png = encode_thumbnail_png(analysis.image(item.sample, item.patch), static_cast<int>(request.thumbnail_pixels));
#endif
      d.tiles.push_back(std::move(t));
    }
    if (e < static_cast<int64_t>(stats.expert_class_counts.size())) d.class_histogram = stats.expert_class_counts[e];
    const auto& o = outcomes[e];
    for (size_t c = 0; c < o.after.per_class.size() && c < accuracy.per_class.size(); ++c)
      d.accuracy_change.push_back(o.after.per_class[c] - accuracy.per_class[c]);
    r.details.push_back(std::move(d));
    step();
  }
  return r;
}

report::ExpertReport make_token_report(TextAnalysisSession& session, const ReportRequest& request,
                                       const ReportProgress& progress) {
  const auto stats = session.statistics(request.threshold);
  std::vector<int64_t> loads;
  for (const auto& e : stats.experts) loads.push_back(e.load);
  const auto shown = select_report_experts(request.experts, loads);
  const auto n = static_cast<int64_t>(stats.experts.size());
  Steps step(progress, (request.sweep ? n : 0) + static_cast<int64_t>(shown.size()));
  const auto& set = session.eval_set();
  const auto token_text = [&](int64_t id) {
    if (!set.tokenizer || id < 0 || id >= set.tokenizer->vocab_size()) return std::string("#") + std::to_string(id);
    try {
      return set.tokenizer->token_text(static_cast<int32_t>(id));
    } catch (const UsageError&) {  // an id that no token has
      return std::string("#") + std::to_string(id);
    }
  };

  // The ablations: every expert's (the sweep), else the shown ones'; all against one baseline.
  std::vector<std::optional<LmAblationOutcome>> outcomes(static_cast<size_t>(n));
  LmBaseline baseline;
  if (request.sweep) {
    const auto sweep = session.sweep(AblationMethod::Sparse, [&](int64_t, int64_t) {
      step();
      return true;
    });
    baseline = sweep.value.baseline;
    for (const auto& o : sweep.value.experts)
      if (!o.outcome.experts.empty() && o.outcome.experts.front() >= 0 && o.outcome.experts.front() < n)
        outcomes[o.outcome.experts.front()] = o;
  }
  for (const auto e : shown)
    if (!outcomes[e]) {
      const auto one = session.ablate({e}).value;
      baseline = one.baseline;
      if (!one.experts.empty()) outcomes[e] = one.experts.front();
    }

  report::ExpertReport r;
  r.title = report::file_name(request.model_path);
  char loss[64];
  std::snprintf(loss, sizeof loss, "%.4f nats/token", baseline.loss_before);
  r.card = {{"model", request.model_path},
            {"architecture", "μMoE GPT (" + std::string(set.tokenizer ? set.tokenizer->name() : "byte") + " tokens)"},
            {"layer", session.layer_name()},
            {"experts", experts_line(stats)},
            {"data", set.identity},
            {"tokens", std::to_string(set.tokens())},
            {"next-token accuracy", percent(baseline.before.overall)},
            {"loss", loss},
            {"made by", "mumoe-studio " + request.app_version},
            {"generated", request.generated_utc.empty() ? report::utc_now_text() : request.generated_utc}};
  r.has_sweep = request.sweep;
  for (int64_t e = 0; e < n; ++e) {
    const auto& o = outcomes[e];
    auto row = row_of(stats.experts[e], token_text, o ? &o->outcome : nullptr, baseline.before.overall);
    if (o) {
      row.has_loss = true;
      row.delta_loss = o->loss_after - baseline.loss_before;
    }
    r.experts.push_back(row);
  }
  for (const auto e : shown) {
    report::ExpertDetail d;
    d.expert = e;
    const auto gallery = session.gallery(gallery_request(0, e, request)).value;
    d.gallery_title = std::to_string(gallery.items.size()) + " random tokens with a ≥ " +
                      [&] {
                        char t[16];
                        std::snprintf(t, sizeof t, "%.2f", request.threshold);
                        return std::string(t);
                      }() +
                      " of " + std::to_string(gallery.eligible) + " eligible, each in ±" +
                      std::to_string(gallery.context_radius) + " tokens of its document";
    for (const auto& item : gallery.items)
      d.contexts.push_back({item.context.before, item.context.token, item.context.after, token_text(item.target),
                            token_text(item.prediction), item.coefficient});
    if (const auto& o = outcomes[e]) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "Ablated: next-token accuracy %.2f %% → %.2f %%, loss %.4f → %.4f nats/token; %lld tokens "
                    "affected, %lld predictions changed.",
                    100 * baseline.before.overall, 100 * o->outcome.after.overall, baseline.loss_before, o->loss_after,
                    static_cast<long long>(o->outcome.affected_samples),
                    static_cast<long long>(o->outcome.changed_predictions));
      d.ablation_summary = line;
    }
    r.details.push_back(std::move(d));
    step();
  }
  return r;
}

int64_t write_report(const report::ExpertReport& report, const std::string& path,
                     const std::vector<io::NamedInput>& inputs) {
  io::check_outputs({{path, "the report"}}, inputs);
  const auto html = report::render_html(report);
  io::AtomicFileWriter out(path);  // names the path on failure
  out.write(html.data(), html.size());
  out.commit();
  return static_cast<int64_t>(html.size());
}

report::ComparisonSection comparison_section(const std::vector<LayerComparison>& rows, const std::string& data_spec) {
  report::ComparisonSection c;
  c.data = data_spec;
  for (const auto& r : rows) {
    report::ComparisonSection::Row row;
    row.model = report::file_name(r.model_path);
    row.layer = r.layer;
    row.kind = r.family.rfind("μMoE", 0) == 0 ? r.family + " " + r.gate : r.family;  // as `compare` prints it
    row.experts = r.experts;
    row.experts_with_effect = r.experts_with_effect;
    row.accuracy = r.accuracy;
    row.mean_polysemanticity = r.mean_polysemanticity;
    row.class_purity = r.mean_class_purity;
    row.information_ratio = r.information_ratio;
    row.load_cv = r.load_cv;
    row.dead_experts = r.dead_experts;
    row.dropped_tokens = r.dropped_tokens;
    c.rows.push_back(std::move(row));
  }
  return c;
}

}  // namespace mumoe::analysis
