#include "bias_report.h"

#include <iomanip>
#include <sstream>

#include "bias_options.h"

namespace mumoe::cli {

void print_variants(std::ostream& out, const editing::BiasTask& task,
                    const std::vector<editing::VariantMetrics>& variants) {
  const auto table = editing::variant_table(task, variants);
  const int w = 16;
  out << std::left << std::setw(34) << "" << std::right;
  for (const auto& name : table.variants) out << std::setw(w) << name;
  out << "\n";
  for (const auto& row : table.rows) {
    out << std::left << std::setw(34) << ((row.target_cell ? "* " : row.cell ? "  " : "") + row.label)
        << std::right;
    for (const auto& value : row.values) {
      std::ostringstream cell;
      if (!value) cell << "—";
      else if (row.fraction) cell << percent(*value);
      else cell << std::fixed << std::setprecision(4) << *value;
      out << std::setw(w) << cell.str();
    }
    out << "\n";
  }
  if (table.mrs_reference.empty()) {
    out << "(* = target subpopulation)\n";
    return;
  }
  out << "(* = target subpopulation; MRS against \"" << table.mrs_reference
      << "\" = the gain on its target cell minus the change on the other three cells)\n";
}

}  // namespace mumoe::cli
