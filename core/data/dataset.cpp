#include "data/dataset.h"

#include <torch/torch.h>

#include <algorithm>

#include "io/errors.h"

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
  d.image_stream = std::move(in.stream);
  return d;
}

Dataset Dataset::from(LabelledFeatures in) {
  auto d = common_fields(in);
  d.features = std::move(in.features);
  return d;
}

std::string feature_file_of(const std::string& spec) {
  static const std::string kFeatures = "features:";
  return spec.compare(0, kFeatures.size(), kFeatures) == 0 ? spec.substr(kFeatures.size()) : "";
}

Dataset load_dataset(const std::string& spec) {
  Dataset d;
  if (const auto file = feature_file_of(spec); !file.empty()) {
    d = Dataset::from(load_feature_file(file));
    d.identity = spec;
  } else {
    d = Dataset::from(open_image_data(spec));
  }
  // Every reader refuses empty data itself; this is the guarantee for the callers (statistics,
  // galleries and accuracies all divide by the sample count).
  if (d.size() == 0) throw FileError(spec, "the data set holds no samples");
  return d;
}

int64_t Dataset::image_channels() const {
  if (image_stream) return image_stream->channels();
  return images.defined() ? images.size(1) : 0;
}

torch::Tensor Dataset::image(int64_t i) const {
  if (!has_images()) throw UsageError(identity + " holds no images");
  if (i < 0 || i >= size())
    throw UsageError("sample " + std::to_string(i) + " does not exist in " + identity + " (0–" +
                     std::to_string(size() - 1) + ")");
  return image_stream ? image_stream->image(i) : images[i];
}

Dataset with_images_in_memory(Dataset data) {
  if (!data.image_stream) return data;
  const auto& stream = *data.image_stream;
  const auto first = stream.image(0);
  data.images = decode_images(stream, torch::arange(stream.size()), [&](const torch::Tensor& image, int64_t sample) {
    if (image.sizes() != first.sizes())
      throw FileError(stream.source(sample), "is " + std::to_string(image.size(2)) + "×" +
                                                 std::to_string(image.size(1)) + " but the first image is " +
                                                 std::to_string(first.size(2)) + "×" + std::to_string(first.size(1)) +
                                                 " (this needs all images at one size)");
    return image;
  });
  data.image_stream.reset();
  return data;
}

int64_t Dataset::attribute_index(const std::string& name) const {
  const auto it = std::find(attribute_names.begin(), attribute_names.end(), name);
  return it == attribute_names.end() ? -1 : static_cast<int64_t>(it - attribute_names.begin());
}

Dataset with_targets(Dataset data, const std::vector<std::string>& names) {
  if (names.empty()) throw UsageError("a multi-label task needs at least one target attribute");
  std::vector<int64_t> columns;
  for (const auto& name : names) {
    const auto column = data.attribute_index(name);
    if (column < 0 || !data.attributes.defined()) {
      std::string have;
      for (const auto& a : data.attribute_names) have += (have.empty() ? "" : ", ") + a;
      throw UsageError(data.identity + " has no attribute '" + name + "'" +
                       (have.empty() ? " (it has no attributes)" : " (it has: " + have + ")"));
    }
    columns.push_back(column);
  }
  data.targets = data.attributes.index_select(1, torch::tensor(columns, torch::kLong)).contiguous();
  data.target_names = names;
  return data;
}

}  // namespace mumoe::data
