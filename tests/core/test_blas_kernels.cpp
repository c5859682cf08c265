// io/blas_kernels.h: the kernels chosen for OpenBLAS before it starts, and that it runs them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>
#include <strings.h>

#include "io/blas_kernels.h"

using mumoe::io::CpuFeatures;
using mumoe::io::openblas_coretype_for;

namespace {

CpuFeatures intel_avx2() {
  CpuFeatures cpu;
  cpu.intel = true;
  cpu.avx2 = cpu.fma = true;
  return cpu;
}

CpuFeatures intel_avx512() {
  auto cpu = intel_avx2();
  cpu.avx512f = cpu.avx512cd = cpu.avx512bw = cpu.avx512dq = cpu.avx512vl = true;
  return cpu;
}

std::string or_none(const char* s) { return s ? s : "(OpenBLAS's own choice)"; }

}  // namespace

TEST(BlasKernels, IntelCpusGetTheKernelsTheirInstructionSetsAllow) {
  EXPECT_EQ(or_none(openblas_coretype_for(intel_avx512())), "SkylakeX");
  EXPECT_EQ(or_none(openblas_coretype_for(intel_avx2())), "Haswell");
  // Xeon Phi: AVX-512F and CD without BW/DQ/VL — not enough for the SkylakeX kernels.
  auto phi = intel_avx2();
  phi.avx512f = phi.avx512cd = true;
  EXPECT_EQ(or_none(openblas_coretype_for(phi)), "Haswell");
  // AVX2 without FMA (an OS or hypervisor that hides FMA): OpenBLAS decides.
  auto no_fma = intel_avx2();
  no_fma.fma = false;
  EXPECT_EQ(openblas_coretype_for(no_fma), nullptr);
  EXPECT_EQ(openblas_coretype_for(CpuFeatures{}), nullptr);
}

TEST(BlasKernels, OtherVendorsAreLeftToOpenBlas) {
  auto amd = intel_avx512();
  amd.intel = false;
  EXPECT_EQ(openblas_coretype_for(amd), nullptr);
}

// The real effect, in this test process (which links the core, so its .preinit_array ran the
// choice): OpenBLAS runs the kernels OPENBLAS_CORETYPE names. Had the choice come after OpenBLAS's
// constructor, OpenBLAS would have chosen alone (Prescott on the Emerald Rapids VM of 2026-11-26).
TEST(BlasKernels, OpenBlasRunsTheKernelsChosenBeforeItStarted) {
  const auto kernels = mumoe::io::blas_kernels();
  if (kernels.empty()) GTEST_SKIP() << "the BLAS loaded is not OpenBLAS";
  torch::mm(torch::ones({64, 64}), torch::ones({64, 64}));  // OpenBLAS in use, whatever LibTorch defers
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const char* ours = openblas_coretype_for(mumoe::io::this_cpu());
  if (ours) {
    EXPECT_NE(set, nullptr) << "an Intel CPU with AVX2 and FMA: OPENBLAS_CORETYPE is set by now";
  }
  if (!set) GTEST_SKIP() << "OpenBLAS chose alone: " << kernels;
  EXPECT_EQ(strcasecmp(kernels.c_str(), set), 0) << "OPENBLAS_CORETYPE=" << set << ", OpenBLAS runs " << kernels;
  EXPECT_NE(mumoe::io::blas_kernels_description().find(kernels), std::string::npos);
}
