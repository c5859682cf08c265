// Fairness metrics against counts worked out by hand, subpopulation predicates, and the edit
// list's undo / redo.
#include <gtest/gtest.h>

#include <cmath>

#include "editing/edit_stack.h"
#include "editing/fairness_metrics.h"
#include "editing/subpopulation.h"
#include "io/errors.h"

namespace mumoe::editing {
namespace {

// 20 samples, laid out cell by cell (truth t, sensitive s):
//   t=1,s=1: 4 samples, 1 predicted right   → 0.25
//   t=1,s=0: 6 samples, 5 right             → 5/6
//   t=0,s=1: 5 samples, 5 right             → 1
//   t=0,s=0: 5 samples, 3 right             → 0.6
struct Samples {
  std::vector<uint8_t> predicted, truth, sensitive;
  void add(int t, int s, int count, int right) {
    for (int i = 0; i < count; ++i) {
      truth.push_back(static_cast<uint8_t>(t));
      sensitive.push_back(static_cast<uint8_t>(s));
      predicted.push_back(static_cast<uint8_t>(i < right ? t : 1 - t));
    }
  }
};

Samples hand_example() {
  Samples x;
  x.add(1, 1, 4, 1);
  x.add(1, 0, 6, 5);
  x.add(0, 1, 5, 5);
  x.add(0, 0, 5, 3);
  return x;
}

TEST(FairnessMetrics, MatchHandComputedCounts) {
  const auto x = hand_example();
  const auto r = fairness_report(x.predicted, x.truth, x.sensitive, 1, 1);
  EXPECT_EQ(r.cells[1][1].count, 4);
  EXPECT_EQ(r.cells[1][1].correct, 1);
  EXPECT_EQ(r.cells[1][0].count, 6);
  EXPECT_EQ(r.cells[0][0].correct, 3);
  EXPECT_EQ(r.samples, 20);
  EXPECT_DOUBLE_EQ(r.target_accuracy, 14.0 / 20);
  EXPECT_DOUBLE_EQ(r.target_subpopulation_accuracy, 0.25);
  EXPECT_DOUBLE_EQ(r.equality_of_opportunity, 5.0 / 6 - 0.25);
  EXPECT_DOUBLE_EQ(r.max_min, 0.25);
  const double mean = (0.25 + 5.0 / 6 + 1 + 0.6) / 4;
  const double var = (std::pow(0.25 - mean, 2) + std::pow(5.0 / 6 - mean, 2) + std::pow(1 - mean, 2) +
                      std::pow(0.6 - mean, 2)) / 4;
  EXPECT_NEAR(r.std_bias, std::sqrt(var), 1e-15);
}

TEST(FairnessMetrics, WorstCellIsTheLowestNonEmptyCell) {
  const auto x = hand_example();
  EXPECT_EQ(worst_cell(fairness_report(x.predicted, x.truth, x.sensitive, 1, 1)), std::make_pair(1, 1));  // 0.25
  // Without the (1, 1) cell the lowest is (0, 0) at 0.6; an empty cell (accuracy 0) never counts.
  Samples y;
  y.add(1, 0, 6, 5);
  y.add(0, 1, 5, 5);
  y.add(0, 0, 5, 3);
  EXPECT_EQ(worst_cell(fairness_report(y.predicted, y.truth, y.sensitive, 1, 1)), std::make_pair(0, 0));
  // Ties keep [1][1], [1][0], [0][1], [0][0] in that order.
  Samples tie;
  tie.add(0, 1, 2, 1);
  tie.add(1, 0, 4, 2);
  tie.add(0, 0, 2, 1);
  EXPECT_EQ(worst_cell(fairness_report(tie.predicted, tie.truth, tie.sensitive, 1, 1)), std::make_pair(1, 0));
  EXPECT_EQ(worst_cell(FairnessReport{}), std::nullopt);
}

TEST(FairnessMetrics, MrsIsTargetGainMinusDamageElsewhere) {
  const auto before_samples = hand_example();
  Samples after_samples;
  after_samples.add(1, 1, 4, 3);  // 0.25 → 0.75: +0.5
  after_samples.add(1, 0, 6, 6);  // 5/6 → 1: |+1/6|
  after_samples.add(0, 1, 5, 4);  // 1 → 0.8: |−0.2|
  after_samples.add(0, 0, 5, 3);  // unchanged
  const auto before = fairness_report(before_samples.predicted, before_samples.truth, before_samples.sensitive, 1, 1);
  const auto after = fairness_report(after_samples.predicted, after_samples.truth, after_samples.sensitive, 1, 1);
  EXPECT_NEAR(mrs(before, after), 0.5 - (1.0 / 6 + 0.2), 1e-15);
  EXPECT_DOUBLE_EQ(mrs(before, before), 0.0);
  const auto other_cell = fairness_report(before_samples.predicted, before_samples.truth, before_samples.sensitive, 0, 1);
  EXPECT_THROW(mrs(before, other_cell), UsageError);
}

TEST(FairnessMetrics, RejectsMismatchedOrNonBinaryInput) {
  EXPECT_THROW(fairness_report({1, 0}, {1}, {0, 0}, 1, 1), UsageError);
  EXPECT_THROW(fairness_report({2}, {1}, {0}, 1, 1), UsageError);
  EXPECT_THROW(fairness_report({1}, {1}, {0}, 2, 1), UsageError);
}

TEST(Subpopulation, ParsesMatchesAndExplainsErrors) {
  const auto s = parse_subpopulation(" long_sleeves = 1 & frame=0 ");
  ASSERT_EQ(s.conditions.size(), 2u);
  EXPECT_EQ(s.text(), "long_sleeves=1&frame=0");
  EXPECT_EQ(parse_subpopulation(s.text()).text(), s.text());
  EXPECT_EQ(s.value_of("frame"), 0);
  EXPECT_EQ(s.value_of("other"), -1);

  const std::vector<std::string> names = {"frame", "x", "long_sleeves"};
  const auto columns = resolve_columns(s, names, "data");
  EXPECT_EQ(columns, (std::vector<int64_t>{2, 0}));
  const std::vector<int64_t> rows = {0, 0, 1,   // member
                                     1, 0, 1,   // frame = 1
                                     0, 1, 0};  // long_sleeves = 0
  EXPECT_EQ(subpopulation_mask(s, columns, rows.data(), 3, 3), (std::vector<uint8_t>{1, 0, 0}));

  for (const char* bad : {"", "a", "a=2", "=1", "a=1&a=0", "a=1&"}) EXPECT_THROW(parse_subpopulation(bad), UsageError) << bad;
  try {
    resolve_columns(parse_subpopulation("Male=1"), names, "biased-fmnist:test");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("biased-fmnist:test has no attribute 'Male'"), std::string::npos);
  }
}

LogitEdit edit_named(const std::string& target) {
  LogitEdit e;
  e.target = target;
  e.output = 0;
  e.lambda = 2;
  e.mean_coefficients = {0.5, 0.5};
  return e;
}

TEST(EditStack, UndoRedoAndNewEditsDiscardTheRedoTail) {
  EditStack s;
  EXPECT_FALSE(s.can_undo());
  EXPECT_THROW(s.undo(), UsageError);
  s.push(edit_named("a"));
  s.push(edit_named("b"));
  EXPECT_EQ(s.applied().size(), 2u);
  s.undo();
  ASSERT_EQ(s.applied().size(), 1u);
  EXPECT_EQ(s.applied()[0].target, "a");
  EXPECT_TRUE(s.can_redo());
  s.redo();
  EXPECT_EQ(s.applied().back().target, "b");
  s.undo();
  s.push(edit_named("c"));  // "b" is gone
  EXPECT_FALSE(s.can_redo());
  ASSERT_EQ(s.all().size(), 2u);
  EXPECT_EQ(s.all()[1].target, "c");

  s.undo();
  const auto copy = EditStack::from_json(s.to_json(), "test");
  EXPECT_EQ(copy.applied_count(), 1u);
  ASSERT_EQ(copy.all().size(), 2u);
  EXPECT_EQ(copy.all()[1].target, "c");
  EXPECT_EQ(copy.all()[1].mean_coefficients, (std::vector<double>{0.5, 0.5}));
  auto broken = s.to_json();
  broken["applied"] = 5;
  EXPECT_THROW(EditStack::from_json(broken, "test"), UsageError);
  broken = s.to_json();
  broken["edits"][0].erase("lambda");
  EXPECT_THROW(EditStack::from_json(broken, "test"), UsageError);
}

}  // namespace
}  // namespace mumoe::editing
