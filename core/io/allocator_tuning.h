// Process-wide tuning of glibc's allocator for tensor code, called first thing by the programs
// (CLI, GUI, benchmarks). By default glibc serves every block over 128 KB with a fresh mmap and
// returns it to the kernel on free (as it adapts, it keeps blocks up to 32 MB at most), so tensor
// code that allocates a few MB per operation pays a page fault and a page clear for every 4 KB it
// touches, every time — ~13 µs a page on this project's VMs. Measured (2 cores): gathering
// 4,000 × 64 doubles in a 1024-expert sweep took 0.8–1.2 ms where the copy needs ~0.1
// (2026-11-24); the demo's cold open (10,000 images through the CNN, whose first layers make
// 50 MB activations per 500-image chunk) took 9.7–10.1 s from the CLI and 9.8–11.3 s in the
// desktop app with blocks up to 32 MB kept, 3.6–3.8 s and 3.1–3.3 s with blocks up to 64 MB
// (2026-11-25; docs/BENCHMARKS.md). So blocks up to 64 MB stay in the heap (glibc 2.36, Debian
// 12's, accepts more than the 32 MB it adapts to by itself; older releases refuse, and get 32 MB)
// and the heap is trimmed only above 512 MB free. A worker thread's arena grows in heaps of
// 64 MB, so there a block close to 64 MB is still mapped afresh, and a heap that becomes wholly
// free may be unmapped: the GUI's analyses, which run on worker threads, keep most blocks, not
// all. The price: resident memory stays near its peak instead of shrinking after each operation
// (the demo's cold open from the CLI: 435 MB peak instead of 330 MB; the GUI benchmark with the
// Bias study: 1.03–1.07 GB instead of 0.70–0.74 GB).
#pragma once

namespace mumoe::io {

/// mallopt M_MMAP_THRESHOLD = 64 MB (32 MB where glibc refuses more), M_TRIM_THRESHOLD = 512 MB,
/// M_TOP_PAD = 64 MB. A no-op outside glibc. Call before any thread starts.
void tune_allocator_for_tensors();

}  // namespace mumoe::io
