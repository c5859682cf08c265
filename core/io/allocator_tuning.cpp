#include "io/allocator_tuning.h"

// <cstdlib> includes <features.h>, which defines __GLIBC__: without a header before the test
// below, the test held only where the unity build happened to put a file with one first in the
// batch, and this function did nothing in a non-unity build (until 2026-11-25).
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mumoe::io {

void tune_allocator_for_tensors() {
#if defined(__GLIBC__)
  // Setting M_MMAP_THRESHOLD also stops glibc's dynamic adjustment of it, which is what we want:
  // the same sizes are served the same way for the whole run.
  // glibc before 2.35 or so refuses thresholds above 32 MB (returns 0); the other calls below
  // would then leave the default 128 KB in place, so ask for the most it takes.
  if (mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024) != 1) mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 512 * 1024 * 1024);
  mallopt(M_TOP_PAD, 64 * 1024 * 1024);
#endif
}

}  // namespace mumoe::io
