// io::tune_allocator_for_tensors (core/io/allocator_tuning.h): after it, a block the size of a
// CNN chunk's activations (50 MB, above glibc's own 32 MB limit for keeping blocks) is served
// from the heap, not by a fresh mmap, and stays in the process when freed — so the next one
// touches memory that is already mapped. Checked through glibc's own statistics (mallinfo2).
#include <gtest/gtest.h>

#include <cstdlib>  // <features.h>: __GLIBC__

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "io/allocator_tuning.h"

namespace allocator_tuning_test {

TEST(AllocatorTuning, LargeTensorBlocksComeFromTheHeapAndStayAfterFree) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "the tuning applies to glibc's allocator only";
#else
  mumoe::io::tune_allocator_for_tensors();
  constexpr size_t kBlock = 50u << 20;
  const size_t mapped_before = mallinfo2().hblkhd;
  auto* block = static_cast<char*>(std::malloc(kBlock));
  ASSERT_NE(block, nullptr);
  block[0] = block[kBlock - 1] = 1;
  // Untuned, glibc maps a 50 MB block of its own (hblkhd grows by at least the block).
  EXPECT_LT(mallinfo2().hblkhd, mapped_before + kBlock) << "the block was mapped afresh";
  std::free(block);
  // Kept: the heap still holds at least the freed block (untrimmed, below 512 MB free).
  EXPECT_GE(mallinfo2().fordblks, kBlock);
#endif
}

}  // namespace allocator_tuning_test
