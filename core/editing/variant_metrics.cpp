#include "editing/variant_metrics.h"

namespace mumoe::editing {

void measure_mrs_against(VariantMetrics& variant, const VariantMetrics& reference) {
  variant.mrs = mrs(reference.report, variant.report);
  variant.mrs_reference = reference.name;
}

std::string edited_model_name(size_t edits) {
  if (edits == 0) return "model";
  return "model + " + std::to_string(edits) + (edits == 1 ? " edit" : " edits");
}

nlohmann::json to_json(const VariantMetrics& variant) {
  auto j = to_json(variant.report);
  j["name"] = variant.name;
  j["test_accuracy"] = variant.test_accuracy;
  j["per_target_accuracy"] = variant.per_target_accuracy;
  if (variant.mrs) {
    j["mrs"] = *variant.mrs;
    j["mrs_reference"] = variant.mrs_reference;
  }
  return j;
}

}  // namespace mumoe::editing
