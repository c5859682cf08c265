// The small multi-label task both CLI bias suites work on: the synthetic biased features
// (tests/editing/biased_features.h) as train.safetensors (3,000 samples, the t=1 & s=1 cell rare)
// and test.safetensors (1,000, balanced) in `dir`, and a μMoE head on targets t, u trained by
// `mumoe train` into head.safetensors (8 experts, rank 4, 4 epochs, seed 1).
#pragma once

#include <gtest/gtest.h>

#include "biased_features.h"
#include "cli_runner.h"
#include "temp_dir.h"

namespace mumoe::testkit {

/// Writes the two splits and trains the head; returns the test split (a failed training is a
/// test failure).
inline data::Dataset train_biased_head(const TempDir& dir) {
  auto test = biased_features(1000, 1.0, 22, "test");
  write_feature_file(dir.file("train.safetensors"), biased_features(3000, 0.05, 21, "train"));
  write_feature_file(dir.file("test.safetensors"), test);
  const auto run = run_cli("train --data features:" + dir.file("train.safetensors") + " --test-data features:" +
                           dir.file("test.safetensors") +
                           " --targets t,u --experts 8 --rank 4 --epochs 4 --seed 1 --quiet --json --output " +
                           dir.file("head.safetensors"));
  EXPECT_EQ(run.code, 0) << run.out;
  return test;
}

}  // namespace mumoe::testkit
