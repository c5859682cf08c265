#include "io/blas_kernels.h"

#include <dlfcn.h>

#include <unistd.h>

#include <cstddef>
#include <cstdlib>

namespace mumoe::io {
namespace {

constexpr char kCoretype[] = "OPENBLAS_CORETYPE";
// Set beside OPENBLAS_CORETYPE, to the same value, when this file chose it (read by the
// description only). Children inherit both; one whose user sets another OPENBLAS_CORETYPE sees
// the two differ.
constexpr char kChosenMark[] = "MUMOE_CHOSE_OPENBLAS_CORETYPE";

// "NAME=" + value into `out` (size `capacity`), cut to fit.
void assign(char* out, size_t capacity, const char* name, const char* value) {
  size_t at = 0;
  for (const char* c = name; *c && at + 2 < capacity; ++c) out[at++] = *c;
  out[at++] = '=';
  for (const char* c = value; *c && at + 1 < capacity; ++c) out[at++] = *c;
  out[at] = 0;
}

bool starts_with(const char* s, const char* prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return false;
  return true;
}

}  // namespace

CpuFeatures this_cpu() {
  CpuFeatures cpu;
#if defined(__x86_64__) && defined(__GNUC__)
  // libgcc fills its feature table in a constructor of its own; before constructors (the
  // .preinit_array) it must be asked to (GCC's manual, __builtin_cpu_init). Its AVX and AVX-512
  // features already require the OS to save the registers (XGETBV), as OpenBLAS's checks do.
  __builtin_cpu_init();
  cpu.intel = __builtin_cpu_is("intel");
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma");
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  cpu.avx512cd = __builtin_cpu_supports("avx512cd");
  cpu.avx512bw = __builtin_cpu_supports("avx512bw");
  cpu.avx512dq = __builtin_cpu_supports("avx512dq");
  cpu.avx512vl = __builtin_cpu_supports("avx512vl");
#endif
  return cpu;
}

const char* openblas_coretype_for(const CpuFeatures& cpu) {
  if (!cpu.intel) return nullptr;
  // OpenBLAS's SkylakeX kernels use these five AVX-512 subsets (Xeon Phi lacks BW/DQ/VL: it gets
  // Haswell from OpenBLAS too).
  if (cpu.avx512f && cpu.avx512cd && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  return nullptr;
}

void choose_blas_kernels(char** argv, char** envp) {
  // Only the kernel's environment (envp) can be read here: libc sets its own `environ` from it
  // in its constructor, after the .preinit_array, and would drop a setenv() made now. So the
  // variable reaches OpenBLAS by running this same program again, at once, with it added: the
  // new process's constructors — OpenBLAS's among them — have not run yet, so nothing is done
  // twice; what it costs is loading and relocating the ~290 shared libraries again (LibTorch
  // brings OpenCV and Qt 5): ~0.15 s more per start, where a start took ~0.45 s (`mumoe
  // --version`, 2026-11-26) — against products 2–3 times faster for the rest of the run.
  // Nothing is allocated before libc is initialised: the new environment is a fixed array, and a
  // larger environment than it holds, like a failed exec, just keeps OpenBLAS's own choice.
  if (!envp) return;
  size_t count = 0;
  for (; envp[count]; ++count)
    if (starts_with(envp[count], kCoretype) && envp[count][sizeof kCoretype - 1] == '=') return;
  const char* coretype = openblas_coretype_for(this_cpu());
  if (!coretype) return;
  static char setting[64], mark[64];
  static char* environment[4096];
  if (count + 3 > sizeof environment / sizeof environment[0]) return;
  assign(setting, sizeof setting, kCoretype, coretype);
  assign(mark, sizeof mark, kChosenMark, coretype);
  for (size_t i = 0; i < count; ++i) environment[i] = envp[i];
  environment[count] = setting;
  environment[count + 1] = mark;
  environment[count + 2] = nullptr;
  execve("/proc/self/exe", argv, environment);  // returns only on failure: carry on as is
}

std::string blas_kernels() {
  // Looked up among the loaded libraries, as blas_threads.cpp does: LibTorch reaches BLAS through
  // Debian's libblas.so.3 alternative, which need not be OpenBLAS.
  const auto corename = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!corename) return "";
  const char* name = corename();
  return name ? name : "";
}

std::string blas_kernels_description() {
  const auto kernels = blas_kernels();
  if (kernels.empty()) return "BLAS: not OpenBLAS";
  const char* set = std::getenv(kCoretype);
  if (!set) return "OpenBLAS kernels: " + kernels + " (OpenBLAS's own choice)";
  const char* chosen = std::getenv(kChosenMark);
  const bool ours = chosen && std::string(chosen) == set;
  return "OpenBLAS kernels: " + kernels + " (OPENBLAS_CORETYPE=" + set +
         (ours ? ", set by mumoe-studio where it was unset)" : ")");
}

}  // namespace mumoe::io

// The entry the dynamic loader runs before any shared library's constructor, OpenBLAS's included.
// The symbol below lets the build name this file to the linker (core/CMakeLists.txt), which would
// otherwise leave an unreferenced member of a static library out.
extern "C" {
__attribute__((used)) int mumoe_choose_blas_kernels_at_start = 0;
}
namespace {
void choose_blas_kernels_at_start(int, char** argv, char** envp) { mumoe::io::choose_blas_kernels(argv, envp); }
__attribute__((section(".preinit_array"), used)) void (*const preinit_entry)(int, char**, char**) =
    choose_blas_kernels_at_start;
}  // namespace
