// io::SingleThreadedOpenMp (core/io/blas_threads.h): the calling thread's OpenMP team is one
// thread while the guard lives — what ATen's intra-op parallelism then uses — other threads keep
// theirs, and the previous size comes back at the end (nested guards included).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "io/blas_threads.h"

namespace thread_guards_test {

TEST(ThreadGuards, OneOpenMpThreadForTheCallingThreadOnlyAndRestored) {
  // ATen picks one thread on some 2-core machines (this project's, 2026-11-25): ask for two so
  // that the guard has something to change.
  const int saved = at::get_num_threads();
  at::set_num_threads(2);
  const int before = at::get_num_threads();
  ASSERT_EQ(before, 2);
  {
    const mumoe::io::SingleThreadedOpenMp guard;
    EXPECT_EQ(at::get_num_threads(), 1);
    int other = 0;
    std::thread([&] { other = at::get_num_threads(); }).join();
    EXPECT_EQ(other, before);
    {
      const mumoe::io::SingleThreadedOpenMp inner;
      EXPECT_EQ(at::get_num_threads(), 1);
    }
    EXPECT_EQ(at::get_num_threads(), 1);
    // Work still runs, on this thread alone.
    const auto x = torch::randn({300, 300});
    EXPECT_TRUE(torch::allclose(x.matmul(torch::eye(300)), x));
  }
  EXPECT_EQ(at::get_num_threads(), before);
  at::set_num_threads(saved);
}

}  // namespace thread_guards_test
