// Options shared by the bias-correction commands (rewrite, fairness, export): the model and the
// test/training data SPECs, and building the BiasStudy with progress on stderr (Ctrl-C cancels).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "editing/bias_study.h"
#include "model/model_file.h"

namespace mumoe::cli {

struct BiasCliOptions {
  std::string model;
  std::string data = "biased-fmnist:test";  ///< where metrics are measured
  std::string train_data;                   ///< "" = data with ":test" → ":train"
  std::string device = "cpu";
  std::string cache;      ///< analysis cache file ("" = cache::default_cache_path())
  bool no_cache = false;  ///< compute the study directly, store nothing
  bool json = false;
  bool quiet = false;

  /// `with_train`: also the --train-data option (rewrite needs it, fairness does not).
  void add_to(CLI::App* app, bool with_train);
  /// The training SPEC: train_data, or data with its ":test" suffix replaced by ":train".
  /// Throws UsageError when neither works.
  std::string training_spec() const;
};

/// Loads the model and data and computes the study (progress on stderr unless quiet). SIGINT
/// cancels: Cancelled propagates and main() exits with 130.
/// `required_attributes` are checked against both data sets before the (slow) computation.
editing::BiasStudy open_bias_study(const BiasCliOptions& options, bool with_train,
                                   const std::vector<std::string>& required_attributes = {});
/// The attributes a task needs: its target, sensitive attribute and predicate attributes.
std::vector<std::string> task_attributes(const editing::BiasTask& task);

/// 0.1234 → " 12.34%".
std::string percent(double value);

}  // namespace mumoe::cli
