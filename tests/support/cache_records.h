// Records of the analysis cache for its tests: a run key, a small run's shapes, deterministic
// chunk content and a field-by-field comparison (plain C++, no LibTorch).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "cache/analysis_cache.h"

namespace mumoe::testkit {

using cache::ChunkRecord;
using cache::RunInfo;
using cache::RunKey;
using cache::SparseRows;

inline RunKey make_key(const std::string& model_hash = "m1", const std::string& model_path = "/models/a.safetensors",
                const std::string& data = "fashion-mnist:test", const std::string& data_hash = "d1",
                const std::string& layer = "head", const std::string& parameters = "{}") {
  return RunKey{model_hash, model_path, data, data_hash, layer, parameters};
}

// 10 samples in chunks of 4: chunks 0, 1 full, chunk 2 short (2 samples). Two expert modes.
inline RunInfo make_info() {
  RunInfo info;
  info.sample_count = 10;
  info.chunk_size = 4;
  info.input_dim = 3;
  info.output_dim = 2;
  info.expert_dims = {5, 3};
  info.attribute_count = 2;
  return info;
}

// Deterministic content for chunk `index`; about a third of the rows of each mode are empty.
inline ChunkRecord make_chunk(const RunInfo& info, int64_t index, int seed = 0) {
  ChunkRecord c;
  c.chunk_index = index;
  c.first_sample = index * info.chunk_size;
  c.count = std::min(info.chunk_size, info.sample_count - c.first_sample);
  for (int64_t i = 0; i < c.count; ++i) {
    const int64_t s = c.first_sample + i;
    c.labels.push_back(s % 7 + seed);
    c.predictions.push_back((s * 3 + seed) % 5);
    for (int64_t k = 0; k < info.output_dim; ++k) c.scores.push_back(0.25 * s - k + seed);
    for (int64_t k = 0; k < info.input_dim; ++k) c.inputs.push_back(static_cast<float>(s) * 0.5f + k + seed);
    for (int64_t k = 0; k < info.attribute_count; ++k) c.attributes.push_back((s + k + seed) % 2);
  }
  for (std::size_t m = 0; m < info.expert_dims.size(); ++m) {
    SparseRows rows;
    rows.offsets.push_back(0);
    for (int64_t i = 0; i < c.count; ++i) {
      const int64_t s = c.first_sample + i;
      if ((s + static_cast<int64_t>(m) + seed) % 3 != 0) {  // else: an empty row
        for (int64_t e = 0; e < info.expert_dims[m]; ++e) {
          if ((e + s + seed) % 2 == 0) {
            rows.indices.push_back(static_cast<int32_t>(e));
            rows.values.push_back(0.125 + 0.5 * e + 0.01 * s + seed);
          }
        }
      }
      rows.offsets.push_back(static_cast<int64_t>(rows.indices.size()));
    }
    c.coefficients.push_back(std::move(rows));
  }
  return c;
}

inline void expect_same(const ChunkRecord& a, const ChunkRecord& b) {
  EXPECT_EQ(a.chunk_index, b.chunk_index);
  EXPECT_EQ(a.first_sample, b.first_sample);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.predictions, b.predictions);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.attributes, b.attributes);
  EXPECT_EQ(a.left_to_model, b.left_to_model);
  ASSERT_EQ(a.coefficients.size(), b.coefficients.size());
  for (std::size_t m = 0; m < a.coefficients.size(); ++m) {
    EXPECT_EQ(a.coefficients[m].offsets, b.coefficients[m].offsets) << "mode " << m;
    EXPECT_EQ(a.coefficients[m].indices, b.coefficients[m].indices) << "mode " << m;
    EXPECT_EQ(a.coefficients[m].values, b.coefficients[m].values) << "mode " << m;
  }
}

}  // namespace mumoe::testkit
