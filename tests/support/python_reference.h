// What the tests against real PyTorch share: the reference models' Python source
// (reference_models.py, prepended to each fixture), reading what Python saved with torch.save, and
// the float32 comparison (relative error ≤ 1e-5). Needs MUMOE_REFERENCE_MODELS_PY.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <string>

#include "io/pytorch_checkpoint.h"
#include "temp_dir.h"

namespace mumoe::testkit {

/// tests/support/reference_models.py, to prepend to a fixture's script.
inline std::string reference_models() { return read_bytes(MUMOE_REFERENCE_MODELS_PY) + "\n"; }

/// Tensors Python saved with torch.save({name: tensor}).
inline std::map<std::string, torch::Tensor> read_expected(const std::string& path) {
  const auto archive = io::PytorchCheckpoint::open(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& e : archive->entries()) out[e.name] = archive->read(e.name);
  return out;
}

/// Same shape and max |actual − expected| ≤ 1e-5 · max(max |expected|, 1).
inline void expect_close(const torch::Tensor& actual, const torch::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const auto scale = expected.abs().max().item<double>();
  const auto diff = (actual.to(torch::kFloat64) - expected.to(torch::kFloat64)).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * std::max(scale, 1.0)) << what << ": max |difference| " << diff << " (scale " << scale << ")";
}

}  // namespace mumoe::testkit
