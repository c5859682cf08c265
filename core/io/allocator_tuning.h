// Process-wide tuning of glibc's allocator for tensor code, called first thing by the programs
// (CLI, GUI, benchmarks). By default glibc serves every block over 128 KB with a fresh mmap and
// returns it to the kernel on free, so tensor code that allocates a few MB per operation pays a
// page fault and a page clear for every 4 KB it touches, every time: measured on a 1024-expert
// ablation sweep (2 cores, 2026-11-24), gathering 4,000 × 64 doubles took 0.8–1.2 ms where the
// copy itself needs ~0.1. Keeping blocks up to 32 MB (glibc's maximum) in the heap and trimming
// it only above 512 MB free makes such blocks reusable; the price is that resident memory stays
// near its peak instead of shrinking after each operation.
#pragma once

namespace mumoe::io {

/// mallopt M_MMAP_THRESHOLD = 32 MB, M_TRIM_THRESHOLD = 512 MB, M_TOP_PAD = 64 MB. A no-op
/// outside glibc. Call before any thread starts.
void tune_allocator_for_tensors();

}  // namespace mumoe::io
