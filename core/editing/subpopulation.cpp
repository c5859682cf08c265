#include "editing/subpopulation.h"

#include <algorithm>
#include <cctype>

#include "io/errors.h"

namespace mumoe::editing {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::string Subpopulation::text() const {
  std::string out;
  for (const auto& c : conditions) out += (out.empty() ? "" : "&") + c.attribute + "=" + std::to_string(c.value);
  return out;
}

int64_t Subpopulation::value_of(const std::string& attribute) const {
  for (const auto& c : conditions)
    if (c.attribute == attribute) return c.value;
  return -1;
}

Subpopulation parse_subpopulation(const std::string& text) {
  Subpopulation s;
  if (trim(text).empty()) throw UsageError("subpopulation '" + text + "' is empty (expected e.g. 'A=1&B=0')");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t amp = text.find('&', start);
    const std::string term = trim(text.substr(start, amp == std::string::npos ? std::string::npos : amp - start));
    const size_t eq = term.find('=');
    const std::string bad = "subpopulation '" + text + "': ";
    if (eq == std::string::npos) throw UsageError(bad + "'" + term + "' is not ATTRIBUTE=0 or ATTRIBUTE=1");
    AttributeCondition c;
    c.attribute = trim(term.substr(0, eq));
    const std::string value = trim(term.substr(eq + 1));
    if (c.attribute.empty()) throw UsageError(bad + "a condition has no attribute name");
    if (value != "0" && value != "1")
      throw UsageError(bad + "the value of " + c.attribute + " must be 0 or 1, not '" + value + "'");
    c.value = value == "1" ? 1 : 0;
    if (s.value_of(c.attribute) >= 0) throw UsageError(bad + c.attribute + " appears twice");
    s.conditions.push_back(c);
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return s;
}

std::vector<int64_t> resolve_columns(const Subpopulation& subpopulation,
                                     const std::vector<std::string>& attribute_names,
                                     const std::string& data_identity) {
  std::vector<int64_t> columns;
  for (const auto& c : subpopulation.conditions) {
    const auto it = std::find(attribute_names.begin(), attribute_names.end(), c.attribute);
    if (it == attribute_names.end()) {
      std::string have;
      for (const auto& a : attribute_names) have += (have.empty() ? "" : ", ") + a;
      throw UsageError(data_identity + " has no attribute '" + c.attribute + "'" +
                       (have.empty() ? " (it has no attributes)" : " (it has: " + have + ")"));
    }
    columns.push_back(static_cast<int64_t>(it - attribute_names.begin()));
  }
  return columns;
}

namespace {
template <typename Value>
std::vector<uint8_t> mask_of(const Subpopulation& subpopulation, const std::vector<int64_t>& columns,
                             const Value* attributes, int64_t samples, int64_t attribute_count) {
  std::vector<uint8_t> mask(static_cast<size_t>(samples), 1);
  for (int64_t i = 0; i < samples; ++i)
    for (size_t k = 0; k < columns.size(); ++k)
      if (attributes[i * attribute_count + columns[k]] != subpopulation.conditions[k].value) {
        mask[static_cast<size_t>(i)] = 0;
        break;
      }
  return mask;
}
}  // namespace

std::vector<uint8_t> subpopulation_mask(const Subpopulation& subpopulation, const std::vector<int64_t>& columns,
                                        const int64_t* attributes, int64_t samples, int64_t attribute_count) {
  return mask_of(subpopulation, columns, attributes, samples, attribute_count);
}

std::vector<uint8_t> subpopulation_mask(const Subpopulation& subpopulation, const std::vector<int64_t>& columns,
                                        const uint8_t* attributes, int64_t samples, int64_t attribute_count) {
  return mask_of(subpopulation, columns, attributes, samples, attribute_count);
}

}  // namespace mumoe::editing
