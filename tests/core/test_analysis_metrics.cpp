// Ablation metrics, expert statistics and gallery selection against hand-computed examples.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "analysis/ablation_metrics.h"
#include "analysis/expert_statistics.h"
#include "analysis/gallery.h"
#include "analysis/run_data.h"
#include "io/errors.h"

using namespace mumoe;
using namespace mumoe::analysis;

namespace {

TEST(AblationMetrics, ClassAccuracyCountsByLabel) {
  // labels 0 0 0 1 1 2; predictions 0 1 0 1 0 0 → class 0: 2/3, class 1: 1/2, class 2: 0/1.
  const auto a = class_accuracy({0, 0, 0, 1, 1, 2}, {0, 1, 0, 1, 0, 0}, 4);
  EXPECT_EQ(a.correct, (std::vector<int64_t>{2, 1, 0, 0}));
  EXPECT_EQ(a.count, (std::vector<int64_t>{3, 2, 1, 0}));
  EXPECT_DOUBLE_EQ(a.per_class[0], 2.0 / 3);
  EXPECT_DOUBLE_EQ(a.per_class[1], 0.5);
  EXPECT_DOUBLE_EQ(a.per_class[2], 0.0);
  EXPECT_DOUBLE_EQ(a.per_class[3], 0.0);  // no samples
  EXPECT_DOUBLE_EQ(a.overall, 3.0 / 6);
  EXPECT_THROW(class_accuracy({0, 5}, {0, 0}, 4), UsageError);
  EXPECT_THROW(class_accuracy({0}, {0, 0}, 4), UsageError);
}

TEST(AblationMetrics, DropAndPolysemanticityFollowEquation4) {
  ClassAccuracy before, after;
  before.per_class = {0.8, 0.5, 0.0, 1.0};
  after.per_class = {0.4, 0.5, 0.0, 0.0};
  const auto d = accuracy_drop(before, after);
  // d = ((0.8−0.4)/0.8, 0, 0 (y_c = 0: defined as 0), (1−0)/1) = (0.5, 0, 0, 1)
  ASSERT_EQ(d.size(), 4u);
  EXPECT_DOUBLE_EQ(d[0], 0.5);
  EXPECT_DOUBLE_EQ(d[1], 0.0);
  EXPECT_DOUBLE_EQ(d[2], 0.0);
  EXPECT_DOUBLE_EQ(d[3], 1.0);
  // argmax is class 3: ‖(0.5, 0, 0, 1) − (0, 0, 0, 1)‖ = 0.5
  EXPECT_DOUBLE_EQ(polysemanticity(d), 0.5);
  EXPECT_TRUE(has_effect(d));
  // A perfectly monosemantic expert, and one that helps a class when removed (negative d).
  EXPECT_DOUBLE_EQ(polysemanticity({0, 1, 0}), 0.0);
  EXPECT_DOUBLE_EQ(polysemanticity({0.25, -0.25, 0}), std::sqrt(0.75 * 0.75 + 0.25 * 0.25));
  EXPECT_FALSE(has_effect({0, 0, 0}));
}

// Three samples, two classes, one mode of three experts:
//   s0 (label 0): a = (0.75, 0.25, 0)
//   s1 (label 1): a = (0,    1,    0)
//   s2 (label 0): a = (0.5,  0,    0.5)
RunData tiny_run() {
  RunData r;
  r.info.sample_count = 3;
  r.info.chunk_size = 3;
  r.info.expert_dims = {3};
  r.labels = {0, 1, 0};
  r.predictions = {0, 1, 1};
  cache::SparseRows rows;
  rows.offsets = {0, 2, 3, 5};
  rows.indices = {0, 1, 1, 0, 2};
  rows.values = {0.75, 0.25, 1.0, 0.5, 0.5};
  r.coefficients = {rows};
  r.finish();
  return r;
}

TEST(ExpertStatistics, MatchHandComputedValues) {
  const auto run = tiny_run();
  const auto s = expert_statistics(run, 0, 2, 0.5);
  ASSERT_EQ(s.experts.size(), 3u);
  // Load (a ≥ 0.5): expert 0 → s0, s2; expert 1 → s1; expert 2 → s2.
  EXPECT_EQ(s.experts[0].load, 2);
  EXPECT_EQ(s.experts[1].load, 1);
  EXPECT_EQ(s.experts[2].load, 1);
  EXPECT_EQ(s.experts[1].support, 2);
  EXPECT_EQ(s.dead_experts, 0);
  EXPECT_EQ(s.experts[0].top_classes, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}}));
  // argmax: s0 → 0, s1 → 1, s2 → tie between 0 and 2 → lowest index 0.
  EXPECT_EQ(s.experts[0].argmax_count, 2);
  EXPECT_EQ(s.expert_class_counts, (std::vector<std::vector<int64_t>>{{2, 0}, {0, 1}, {0, 0}}));
  // H_s = mean(H(.75,.25), H(1), H(.5,.5)) = (0.811278 + 0 + 1) / 3
  const double h0 = -(0.75 * std::log2(0.75) + 0.25 * std::log2(0.25));
  EXPECT_NEAR(s.gate_entropy_bits, (h0 + 0 + 1) / 3, 1e-12);
  // mean a = (1.25/3, 1.25/3, 0.5/3) → H_u
  const double m[3] = {1.25 / 3, 1.25 / 3, 0.5 / 3};
  EXPECT_NEAR(s.utilisation_entropy_bits, -(m[0] * std::log2(m[0]) + m[1] * std::log2(m[1]) + m[2] * std::log2(m[2])),
              1e-12);
  // The table {{2,0},{0,1}} determines E and Y: I(E;Y) = H(Y) = H(2/3, 1/3).
  const double hy = -(2.0 / 3 * std::log2(2.0 / 3) + 1.0 / 3 * std::log2(1.0 / 3));
  EXPECT_NEAR(s.mutual_information_bits, hy, 1e-12);
  EXPECT_NEAR(s.mean_active_experts, 5.0 / 3, 1e-12);
  // With a higher threshold expert 2 is dead.
  EXPECT_EQ(expert_statistics(run, 0, 2, 0.9).dead_experts, 2);
  EXPECT_THROW(expert_statistics(run, 1, 2), UsageError);
}

// The tiny run as a multi-label model's with two outputs and three attributes (output 0 is
// attribute 2, output 1 attribute 0): truths and decisions become bitmasks.
RunData tiny_multilabel_run() {
  auto r = tiny_run();
  r.info.attribute_count = 3;
  r.info.output_dim = 2;
  r.attributes = {1, 0, 1,   // s0: output 0 true, output 1 true  → 0b11
                  0, 1, 0,   // s1: neither                        → 0b00
                  1, 1, 0};  // s2: output 1 only                  → 0b10
  r.scores = {2.0, 0.5,      // s0 decides 0b11 (both right)
              -1.0, 3.0,     // s1 decides 0b10 (output 1 wrong)
              -0.5, -0.0};   // s2 decides 0b00 (output 1 wrong: 0 is not > 0)
  make_multilabel(r, {2, 0});
  return r;
}

TEST(MultilabelRuns, BitmasksAccuracyAndStatisticsPerOutput) {
  const auto run = tiny_multilabel_run();
  EXPECT_TRUE(run.multilabel);
  EXPECT_EQ(run.labels, (std::vector<int64_t>{3, 0, 2}));
  EXPECT_EQ(run.predictions, (std::vector<int64_t>{3, 2, 0}));
  // Output 0 right on all three; output 1 right on s0 only.
  const auto a = output_accuracy(run.labels, run.predictions, 2);
  EXPECT_EQ(a.correct, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(a.count, (std::vector<int64_t>{3, 3}));
  EXPECT_DOUBLE_EQ(a.per_class[1], 1.0 / 3);
  EXPECT_DOUBLE_EQ(a.overall, 4.0 / 6);
  // Loads as before (expert 0: s0, s2); positives among them: output 0 in s0, output 1 in s0, s2.
  const auto s = expert_statistics(run, 0, 2, 0.5);
  EXPECT_TRUE(s.multilabel);
  EXPECT_EQ(s.experts[0].top_classes, (std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {0, 1}}));
  // argmax experts: s0 → 0, s1 → 1, s2 → 0. Output 0 is positive only in s0 (expert 0): I(E;Y_0)
  // = H(Y_0) − H(Y_0|E) = H(1/3) − (2/3)·H(1/2); output 1 (s0, s2 under expert 0; s1 negative
  // under expert 1) is determined by E: I = H(Y_1) = H(1/3).
  const auto h = [](double p) { return -(p * std::log2(p) + (1 - p) * std::log2(1 - p)); };
  EXPECT_NEAR(s.mutual_information_bits, ((h(1.0 / 3) - 2.0 / 3) + h(1.0 / 3)) / 2, 1e-12);
  EXPECT_NEAR(s.class_entropy_bits, h(1.0 / 3), 1e-12);
  EXPECT_EQ(label_text(3, {"t", "u"}, true), "t+u");
  EXPECT_EQ(label_text(0, {"t", "u"}, true), "none");
  EXPECT_EQ(label_text(1, {"t", "u"}, false), "u");
  // A subpopulation of the attributes: attribute names a, b, c; b=1 holds s1 and s2.
  const auto members = subpopulation_members(run, {"a", "b", "c"}, "b=1", "tiny");
  EXPECT_EQ(members, (std::vector<uint8_t>{0, 1, 1}));
  GalleryRequest r;
  r.expert = 0;
  r.order = GalleryOrder::Top;
  r.subpopulation = "b=1";
  const auto g = select_gallery(run, r, members);
  ASSERT_EQ(g.items.size(), 1u);
  EXPECT_EQ(g.items[0].sample, 2);
  EXPECT_TRUE(g.multilabel);
  EXPECT_THROW(select_gallery(run, r), UsageError);  // a filter without members is refused
  EXPECT_THROW(subpopulation_members(run, {"a", "b", "c"}, "z=1", "tiny"), UsageError);
}

TEST(Gallery, TopOrdersByCoefficientThenSample) {
  const auto run = tiny_run();
  GalleryRequest r;
  r.expert = 0;
  r.order = GalleryOrder::Top;
  const auto g = select_gallery(run, r);
  ASSERT_EQ(g.items.size(), 2u);
  EXPECT_EQ(g.eligible, 2);
  EXPECT_EQ(g.items[0].sample, 0);
  EXPECT_DOUBLE_EQ(g.items[0].coefficient, 0.75);
  EXPECT_EQ(g.items[1].sample, 2);
  EXPECT_EQ(g.items[1].prediction, 1);
}

TEST(Gallery, RandomDrawIsSeededAndRespectsTheThreshold) {
  // 200 samples routed to expert 0 with a = s/200; threshold 0.5 keeps s ≥ 100.
  RunData r;
  r.info.sample_count = 200;
  r.info.expert_dims = {2};
  cache::SparseRows rows;
  rows.offsets = {0};
  for (int s = 0; s < 200; ++s) {
    r.labels.push_back(s % 3);
    r.predictions.push_back(s % 3);
    if (s > 0) {
      rows.indices.push_back(0);
      rows.values.push_back(s / 200.0);
    }
    rows.offsets.push_back(static_cast<int64_t>(rows.indices.size()));
  }
  r.coefficients = {rows};
  r.finish();
  GalleryRequest q;
  q.count = 16;
  q.seed = 7;
  const auto a = select_gallery(r, q), b = select_gallery(r, q);
  EXPECT_EQ(a.eligible, 100);
  ASSERT_EQ(a.items.size(), 16u);
  std::set<int64_t> distinct;
  for (size_t i = 0; i < a.items.size(); ++i) {
    EXPECT_GE(a.items[i].coefficient, 0.5);
    EXPECT_EQ(a.items[i].sample, b.items[i].sample);
    distinct.insert(a.items[i].sample);
  }
  EXPECT_EQ(distinct.size(), 16u);
  q.seed = 8;
  const auto c = select_gallery(r, q);
  bool differs = false;
  for (size_t i = 0; i < c.items.size(); ++i) differs |= c.items[i].sample != a.items[i].sample;
  EXPECT_TRUE(differs);
  q.count = 1000;  // more than eligible: all of them
  EXPECT_EQ(select_gallery(r, q).items.size(), 100u);
  q.expert = 2;
  EXPECT_THROW(select_gallery(r, q), UsageError);
}

}  // namespace
