// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss/blas_check.hpp: which OpenBLAS kernels this process runs, and which
// OPENBLAS_CORETYPE fits the CPU.
#include <kloss/blas_check.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <array>
#include <string_view>

namespace kloss {
namespace {

// OpenBLAS's x86-64 core names (driver/others/dynamic.c), by the newest
// instruction set their kernels use.
constexpr std::array<std::string_view, 3> avx512_cores{"SkylakeX", "Cooperlake", "SapphireRapids"};
constexpr std::array<std::string_view, 4> avx2_cores{"Haswell", "Zen", "SkylakeX", "Cooperlake"};

template <class Names>
bool among(std::string_view core, const Names& names) {
  return std::find(names.begin(), names.end(), core) != names.end();
}

}  // namespace

std::string openblas_core() {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  // a program that has not loaded its BLAS yet (kloss-ops): the one Kokkos
  // Kernels links, through the system's BLAS name
  for (const char* lib : {"libblas.so.3", "libopenblas.so.0"}) {
    if (fn) break;
    if (void* h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL)) fn = reinterpret_cast<Fn>(dlsym(h, "openblas_get_corename"));
  }
  if (!fn) return "";
  const char* name = fn();
  return name ? name : "";
}

std::string openblas_coretype_advice(const std::string& core, bool avx512f, bool avx2) {
  if (core.empty()) return "";
  if (avx512f) return among(core, avx512_cores) ? "" : "SkylakeX";
  if (avx2) return among(core, avx2_cores) || core == "SapphireRapids" ? "" : "Haswell";
  return "";
}

std::string openblas_coretype_advice() {
  // a core chosen by whoever set the variable (some machines need an older
  // one: OpenBLAS releases have miscomputed on CPUs newer than they are)
  if (const char* e = std::getenv("OPENBLAS_CORETYPE"); e && *e) return "";
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return openblas_coretype_advice(openblas_core(), __builtin_cpu_supports("avx512f"), __builtin_cpu_supports("avx2"));
#else
  return "";
#endif
}

}  // namespace kloss
