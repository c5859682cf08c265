// What a multi-label model's shareable report asks for (editing/bias_report.h): torch-free, so
// that the desktop app asks for one through BiasSession::report.
#pragma once

#include <string>

#include "editing/bias_task.h"

namespace mumoe::editing {

struct BiasReportRequest {
  std::string model_path, data_spec;
  bool baselines = false;  ///< also the blind-threshold and oversampling baselines (seconds)
  OversampleOptions oversample;
  std::string app_version;
  std::string generated_utc;  ///< "" = now
};

}  // namespace mumoe::editing
