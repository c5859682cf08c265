// Subpopulations: conjunctions of binary attribute values such as `long_sleeves=1 & frame=1`
// (the paper's "blond males", "old females"). Plain C++, so the GUI can parse and show them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mumoe::editing {

struct AttributeCondition {
  std::string attribute;
  int64_t value = 1;  ///< 0 or 1
};

struct Subpopulation {
  std::vector<AttributeCondition> conditions;  ///< all must hold (empty: every sample)

  /// Canonical text, e.g. "long_sleeves=1&frame=1" (parse_subpopulation(text()) == *this).
  std::string text() const;
  /// The value the predicate fixes for `attribute`, or -1 when it does not mention it.
  int64_t value_of(const std::string& attribute) const;
};

/// Parses "A=0&B=1" (spaces allowed, values 0/1, no attribute twice). Throws UsageError that
/// quotes the text and says what is wrong.
Subpopulation parse_subpopulation(const std::string& text);

/// Column of each condition's attribute in `attribute_names`. Throws UsageError naming
/// `data_identity` and the missing attribute.
std::vector<int64_t> resolve_columns(const Subpopulation& subpopulation,
                                     const std::vector<std::string>& attribute_names,
                                     const std::string& data_identity);

/// Membership of every sample: attributes is row-major [samples, attribute_count] 0/1.
std::vector<uint8_t> subpopulation_mask(const Subpopulation& subpopulation, const std::vector<int64_t>& columns,
                                        const int64_t* attributes, int64_t samples, int64_t attribute_count);
/// The same over byte attributes, as an analysis run stores them (cache::ChunkRecord::attributes).
std::vector<uint8_t> subpopulation_mask(const Subpopulation& subpopulation, const std::vector<int64_t>& columns,
                                        const uint8_t* attributes, int64_t samples, int64_t attribute_count);

}  // namespace mumoe::editing
