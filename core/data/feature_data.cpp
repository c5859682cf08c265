#include "data/feature_data.h"
#include "io/json_file.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "io/errors.h"
#include "io/safetensors.h"

namespace mumoe::data {
namespace {

std::vector<std::string> name_list(const io::SafetensorsFile& file, const std::string& key) {
  auto it = file.metadata().find(key);
  if (it == file.metadata().end()) return {};
  try {
    return io::parse_bounded_json(it->second, file.path()).get<std::vector<std::string>>();
  } catch (const std::exception&) {
    throw FileError(file.path(), "metadata '" + key + "' is not a JSON list of strings");
  }
}

}  // namespace

LabelledFeatures load_feature_file(const std::string& path) {
  const auto file = io::SafetensorsFile::open(path);
  for (const char* name : {"features", "labels"})
    if (!file.contains(name)) throw FileError(path, std::string("no tensor named '") + name + "'");
  LabelledFeatures out;
  out.identity = "features:" + path;
  auto features = file.read("features");
  if (features.dim() != 2 || !features.is_floating_point())
    throw FileError(path, "'features' must be a float tensor [S, I], got " + c10::str(features.sizes()));
  if (!torch::isfinite(features).all().item<bool>()) throw FileError(path, "'features' contains NaN or infinite values");
  out.features = features.to(torch::kFloat32);
  const int64_t s = features.size(0);
  if (s == 0) throw FileError(path, "holds no samples ('features' has 0 rows)");

  auto labels = file.read("labels");
  if (labels.dim() != 1 || labels.size(0) != s)
    throw FileError(path, "'labels' must be [" + std::to_string(s) + "] to match 'features', got " + c10::str(labels.sizes()));
  if (labels.is_floating_point() && (!torch::isfinite(labels).all().item<bool>() || !torch::equal(labels, labels.round())))
    throw FileError(path, "'labels' must hold whole class indices");
  // Range-checked in double before the conversion: a float label of 1e30 has no int64 value.
  if (labels.is_floating_point() && (labels.abs() >= static_cast<double>(kMaxClasses)).any().item<bool>())
    throw FileError(path, "'labels' holds a class index of " + std::to_string(kMaxClasses) +
                              " or more (at most " + std::to_string(kMaxClasses) + " classes are supported)");
  out.labels = labels.to(torch::kLong);
  const int64_t min_label = out.labels.min().item<int64_t>();
  const int64_t max_label = out.labels.max().item<int64_t>();
  if (min_label < 0) throw FileError(path, "'labels' holds a negative class index (" + std::to_string(min_label) + ")");
  // max_label + 1 would overflow for 2^63 − 1; compare first.
  if (max_label >= kMaxClasses)
    throw FileError(path, "'labels' holds class index " + std::to_string(max_label) + " (at most " +
                              std::to_string(kMaxClasses) + " classes are supported)");

  out.class_names = name_list(file, "mumoe.class_names");
  const int64_t classes = max_label + 1;
  if (out.class_names.empty())
    for (int64_t c = 0; c < classes; ++c) out.class_names.push_back(std::to_string(c));
  if (static_cast<int64_t>(out.class_names.size()) < classes)
    throw FileError(path, "label " + std::to_string(max_label) + " but only " +
                              std::to_string(out.class_names.size()) + " class names");

  if (file.contains("attributes")) {
    auto attributes = file.read("attributes");
    if (attributes.dim() != 2 || attributes.size(0) != s)
      throw FileError(path, "'attributes' must be [" + std::to_string(s) + ", K], got " + c10::str(attributes.sizes()));
    if (!((attributes == 0) | (attributes == 1)).all().item<bool>())
      throw FileError(path, "'attributes' must hold only 0 and 1");
    out.attributes = attributes.to(torch::kLong);
    out.attribute_names = name_list(file, "mumoe.attribute_names");
    if (out.attribute_names.empty())
      for (int64_t k = 0; k < attributes.size(1); ++k) out.attribute_names.push_back("attr" + std::to_string(k));
    if (static_cast<int64_t>(out.attribute_names.size()) != attributes.size(1))
      throw FileError(path, std::to_string(out.attribute_names.size()) + " attribute names for " +
                                std::to_string(attributes.size(1)) + " attribute columns");
  }
  return out;
}

}  // namespace mumoe::data
