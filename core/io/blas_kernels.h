// Which OpenBLAS kernels every mumoe program runs — chosen before OpenBLAS starts.
//
// Why: Debian 12's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its matrix-product kernels from the
// CPU's model number when the library is loaded, and for an Intel model it does not know it
// falls back to its oldest x86-64 kernels, "Prescott" (SSE3). Intel's newer processors are such
// models: on this project's Emerald Rapids VM (family 6, model 207; AVX-512, 2026-11-26) every
// product ran at a third to a half of the speed the CPU allows — the softmax head's first ablation
// click 35 ms instead of 12 ms, its bare forward 26 ms instead of 10 ms (docs/BENCHMARKS.md).
// OpenBLAS reads its choice from the environment variable OPENBLAS_CORETYPE, once, in its
// library constructor: too early for main(). So every executable that links the core runs
// choose_blas_kernels() from its .preinit_array, which the dynamic loader runs before any shared
// library's constructor (core/CMakeLists.txt makes the linker keep it). libc's own environment is
// not set up yet at that point, so the variable cannot simply be set: where it is to be added, the
// program is started again at once with it (the .cpp says what that costs). Setting
// OPENBLAS_CORETYPE yourself avoids the restart (under a debugger, say).
//
// The choice, only when OPENBLAS_CORETYPE is unset (a value already set — by the user, or by a
// machine where a kernel is known to misbehave — is always left as it is), and only on Intel
// CPUs: AVX-512 (F, CD, BW, DQ, VL, enabled by the OS) → "SkylakeX", else AVX2 + FMA → "Haswell",
// else nothing. These are the kernels OpenBLAS itself chooses for every Intel model it knows with
// those features (Cooperlake and Sapphire Rapids differ only in bfloat16 routines, which LibTorch's
// float32/float64 products do not call); for the models it does not know, they replace Prescott.
// Other vendors are left to OpenBLAS (it recognises AMD's and Hygon's by family, not model).
// Child processes inherit the variable, so a Python reference a test starts runs the same
// kernels. Plain C++, no LibTorch.
#pragma once

#include <string>

namespace mumoe::io {

/// What the choice depends on: the CPU's vendor and the instruction sets it and the OS support.
struct CpuFeatures {
  bool intel = false;
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512cd = false, avx512bw = false, avx512dq = false, avx512vl = false;
};

/// This CPU's features (all false off x86-64).
CpuFeatures this_cpu();

/// The OPENBLAS_CORETYPE for `cpu`, or nullptr to leave the choice to OpenBLAS.
const char* openblas_coretype_for(const CpuFeatures& cpu);

/// Runs this program again (execve of /proc/self/exe, same arguments) with OPENBLAS_CORETYPE
/// added as openblas_coretype_for(this_cpu()) says, unless `envp` (the process's initial
/// environment) already sets it or there is nothing to choose. Only for the .preinit_array: it
/// returns only when nothing is done or the exec fails (then OpenBLAS chooses alone).
void choose_blas_kernels(char** argv, char** envp);

/// The kernels OpenBLAS runs in this process ("SkylakeX", "Haswell", …), as OpenBLAS names
/// them; "" when the BLAS loaded is not OpenBLAS.
std::string blas_kernels();

/// One line for --version and benchmark output, e.g. "OpenBLAS kernels: SkylakeX
/// (OPENBLAS_CORETYPE=SkylakeX, set by mumoe-studio where it was unset)", "… Haswell
/// (OPENBLAS_CORETYPE=Haswell)" (the user's) or "… Zen (OpenBLAS's own choice)".
std::string blas_kernels_description();

}  // namespace mumoe::io
