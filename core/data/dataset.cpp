#include "data/dataset.h"

#include <torch/torch.h>

namespace mumoe::data {

namespace {

// The fields both kinds of labelled data share.
template <typename Labelled>
Dataset common_fields(Labelled& in) {
  Dataset d;
  d.labels = std::move(in.labels);
  d.attributes = std::move(in.attributes);
  d.class_names = std::move(in.class_names);
  d.attribute_names = std::move(in.attribute_names);
  d.identity = std::move(in.identity);
  return d;
}

}  // namespace

Dataset Dataset::from(LabelledImages in) {
  auto d = common_fields(in);
  d.images = std::move(in.images);
  return d;
}

Dataset Dataset::from(LabelledFeatures in) {
  auto d = common_fields(in);
  d.features = std::move(in.features);
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
