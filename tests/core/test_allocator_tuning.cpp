// io::tune_allocator_for_tensors (core/io/allocator_tuning.h): after it, a block the size of a
// CNN chunk's activations (50 MB, above the 32 MB glibc keeps by itself) is served from the heap,
// not by a fresh mmap, and stays in the process when freed — so the next one touches memory that
// is already mapped. Checked through glibc's own statistics (mallinfo2, glibc ≥ 2.33). The tuning
// is process-wide; every program calls it first, so later tests in this binary see what the
// programs see.
#include <gtest/gtest.h>

#include <cstdlib>  // <features.h>: __GLIBC__

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
#define MUMOE_HAS_MALLINFO2 1
#include <malloc.h>
#endif

#include "io/allocator_tuning.h"

namespace allocator_tuning_test {

TEST(AllocatorTuning, LargeTensorBlocksComeFromTheHeapAndStayAfterFree) {
#if !defined(MUMOE_HAS_MALLINFO2)
  GTEST_SKIP() << "the tuning and its statistics are glibc's (2.33 or later)";
#else
  mumoe::io::tune_allocator_for_tensors();
  constexpr size_t kBlock = 50u << 20;
  const size_t mapped_before = mallinfo2().hblkhd;
  // volatile: the allocation and the writes must happen as written.
  char* volatile block = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(block, nullptr);
  block[0] = 1;
  block[kBlock - 1] = 1;
  // Untuned (or at 32 MB), glibc maps a 50 MB block of its own: hblkhd grows by the block.
  EXPECT_LT(mallinfo2().hblkhd, mapped_before + kBlock) << "the block was mapped afresh";
  const struct mallinfo2 before_free = mallinfo2();
  std::free(block);
  const struct mallinfo2 after_free = mallinfo2();
  // Kept: the heap did not shrink, and its free space grew by the whole block (a mapped block
  // would leave both unchanged; a trimmed heap would shrink).
  EXPECT_EQ(after_free.arena, before_free.arena);
  EXPECT_GE(after_free.fordblks, before_free.fordblks + kBlock);
#endif
}

}  // namespace allocator_tuning_test
