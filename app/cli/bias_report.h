// Text rendering of fairness reports, shared by `mumoe fairness` and `mumoe rewrite`. The
// metrics themselves (and their JSON) are the core's: editing/variant_metrics.h.
#pragma once

#include <ostream>
#include <vector>

#include "editing/bias_task.h"
#include "editing/variant_metrics.h"

namespace mumoe::cli {

/// The 4-cell table and the metrics, one column per variant (the first sets the cells' order
/// and sizes); the MRS row shows each variant's MRS and, below the table, its reference.
void print_variants(std::ostream& out, const editing::BiasTask& task,
                    const std::vector<editing::VariantMetrics>& variants);

}  // namespace mumoe::cli
