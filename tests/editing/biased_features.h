// A small synthetic multi-label task with a spurious bias, as feature files or a Dataset: target
// t, sensitive s (the (t=1, s=1) cell is rare in training), a third attribute u; features carry
// t, s and u plus noise, so a trained head leans on s for t.
#pragma once

#include <torch/torch.h>

#include <string>

#include "data/dataset.h"
#include "io/safetensors.h"

namespace mumoe::testkit {

inline data::Dataset biased_features(int64_t samples, double rare_share, uint64_t seed, const std::string& identity) {
  torch::manual_seed(12345);  // the same feature directions for every split
  const auto directions = torch::randn({3, 8});
  torch::manual_seed(seed);
  const auto t = torch::rand({samples}) < 0.5;
  auto s = torch::rand({samples}) < 0.5;
  // Keep only a share of the (1, 1) cell: the rest become s = 0.
  s = s & (~t | (torch::rand({samples}) < rare_share));
  const auto u = torch::rand({samples}) < 0.3;
  auto x = torch::randn({samples, 8}) * 0.6;
  x += t.to(torch::kFloat).unsqueeze(1) * directions[0] * 1.5 + s.to(torch::kFloat).unsqueeze(1) * directions[1] +
       u.to(torch::kFloat).unsqueeze(1) * directions[2] * 1.5;
  data::Dataset d;
  d.features = x;
  d.labels = torch::zeros({samples}, torch::kLong);
  d.attributes = torch::stack({t, s, u}, 1).to(torch::kLong);
  d.class_names = {"sample"};
  d.attribute_names = {"t", "s", "u"};
  d.identity = identity;
  return d;
}

inline void write_feature_file(const std::string& path, const data::Dataset& d) {
  io::write_safetensors(path, {{"features", d.features}, {"labels", d.labels}, {"attributes", d.attributes}},
                        {{"mumoe.class_names", "[\"sample\"]"}, {"mumoe.attribute_names", "[\"t\",\"s\",\"u\"]"}});
}

}  // namespace mumoe::testkit
