#include "data/dataset.h"

#include <torch/torch.h>

namespace mumoe::data {

Dataset Dataset::from(LabelledImages in) {
  Dataset d;
  d.images = std::move(in.images);
  d.labels = std::move(in.labels);
  d.attributes = std::move(in.attributes);
  d.class_names = std::move(in.class_names);
  d.attribute_names = std::move(in.attribute_names);
  d.identity = std::move(in.identity);
  return d;
}

Dataset Dataset::from(LabelledFeatures in) {
  Dataset d;
  d.features = std::move(in.features);
  d.labels = std::move(in.labels);
  d.attributes = std::move(in.attributes);
  d.class_names = std::move(in.class_names);
  d.attribute_names = std::move(in.attribute_names);
  d.identity = std::move(in.identity);
  return d;
}

Dataset load_dataset(const std::string& spec) {
  static const std::string kFeatures = "features:";
  if (spec.compare(0, kFeatures.size(), kFeatures) == 0) {
    auto d = Dataset::from(load_feature_file(spec.substr(kFeatures.size())));
    d.identity = spec;
    return d;
  }
  return Dataset::from(load_image_data(spec));
}

}  // namespace mumoe::data
