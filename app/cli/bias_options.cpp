#include "bias_options.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli_support.h"
#include "data/dataset.h"
#ifdef MUMOE_WITH_ANALYSIS
#include "editing/cached_bias_study.h"
#endif
#include "io/errors.h"
#include "model/classifier_model.h"

namespace mumoe::cli {
void BiasCliOptions::add_to(CLI::App* app, bool with_train) {
  app->add_option("MODEL", model, "Multi-label model file (e.g. resources/demo/biased-fmnist.mumoe.safetensors)")->required();
  app->add_option("--data", data, "Test data SPEC where metrics are measured (default biased-fmnist:test)");
  if (with_train)
    app->add_option("--train-data", train_data,
                    "Training data SPEC that defines the subpopulation's mean coefficients "
                    "(default: --data with :test replaced by :train)");
  add_device_option(app, device, "cpu (default) or cuda[:N] for the backbone");
  app->add_option("--cache", cache, "Analysis cache that keeps the layer's per-sample arrays (default: the user cache)");
  app->add_flag("--no-cache", no_cache, "Compute everything afresh and store nothing");
  add_json_flag(app, json);
  add_quiet_flag(app, quiet);
}

std::string BiasCliOptions::training_spec() const {
  if (!train_data.empty()) return train_data;
  if (auto train = editing::training_spec_for(data)) return *train;
  throw UsageError("cannot tell the training split of '" + data + "': give --train-data");
}

std::vector<std::string> task_attributes(const editing::BiasTask& task) {
  std::vector<std::string> names = {task.target, task.sensitive};
  for (const auto& c : task.subpopulation.conditions) names.push_back(c.attribute);
  return names;
}

editing::BiasStudy open_bias_study(const BiasCliOptions& o, bool with_train,
                                   const std::vector<std::string>& required_attributes) {
  const auto file = model::ModelFile::load(o.model);
  auto model = model::ClassifierModel::load(file);
  auto test = data::load_dataset(o.data);
  auto train = with_train ? data::load_dataset(o.training_spec()) : data::Dataset{};
  for (const auto* d : {&test, &train})
    if (d->size() > 0)
      for (const auto& name : required_attributes)
        if (d->attribute_index(name) < 0) {
          std::string have;
          for (const auto& a : d->attribute_names) have += (have.empty() ? "" : ", ") + a;
          throw UsageError(d->identity + " has no attribute '" + name + "'" +
                           (have.empty() ? " (it has no attributes)" : " (it has: " + have + ")"));
        }
  clear_interrupted();
  const auto previous = catch_interrupts();
  const auto start = std::chrono::steady_clock::now();
  int last_decile = -1;
  auto progress = [&](int64_t done, int64_t total) {
    const int decile = static_cast<int>(10 * done / std::max<int64_t>(total, 1));
    if (!o.quiet && decile != last_decile) {
      last_decile = decile;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "computing the layer's inputs %lld/%lld (%d%%) %.1f s\n", static_cast<long long>(done),
                   static_cast<long long>(total), decile * 10, s);
    }
    return !interrupted();
  };
  try {
#ifdef MUMOE_WITH_ANALYSIS
    // Through the analysis cache: the second command on the same model and data reads it.
    auto study = o.no_cache ? editing::BiasStudy::create(std::move(model), std::move(train), std::move(test), o.device,
                                                         progress)
                            : editing::open_cached_bias_study(o.model, std::move(train), std::move(test), o.cache,
                                                              o.device, progress);
#else
    auto study = editing::BiasStudy::create(std::move(model), std::move(train), std::move(test), o.device, progress);
#endif
    std::signal(SIGINT, previous);
    return study;
  } catch (...) {
    std::signal(SIGINT, previous);
    throw;
  }
}

std::string percent(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%6.2f%%", 100 * value);
  return buf;
}

}  // namespace mumoe::cli
