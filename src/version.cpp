// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss::version, kloss::configuration and kloss::print_configuration: what
// this build of kloss is and what it runs on. Compile-time facts come from
// the macros of the build (KLOSS_HAVE_*) and of Kokkos and Kokkos Kernels'
// configuration headers; the MPI and HDF5 versions are asked of the
// libraries the program loaded, which is what a result depends on.
#include <kloss/config.hpp>
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <kloss/head_products.hpp>
#include <kloss/version.hpp>
#include <ostream>

#if __has_include(<KokkosKernels_config.h>)
#include <KokkosKernels_config.h>
#define KLOSS_VERSION_HAS_KOKKOS_KERNELS
#endif
#ifdef KLOSS_HAVE_MPI
#include <mpi.h>
#endif
#ifdef KLOSS_HAVE_HDF5
#include <hdf5.h>
#endif

namespace kloss {
namespace {

// "4.6.01" from 40601: Kokkos' own spelling of its releases.
std::string dotted(int v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d.%d.%02d", v / 10000, v / 100 % 100, v % 100);
  return buf;
}

std::string joined(const std::vector<std::string>& parts, const char* none) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s.empty() ? none : s;
}

// The execution spaces Kokkos was built with, devices first.
std::string execution_spaces() {
  std::vector<std::string> spaces;
#ifdef KOKKOS_ENABLE_CUDA
  spaces.push_back("Cuda");
#endif
#ifdef KOKKOS_ENABLE_HIP
  spaces.push_back("HIP");
#endif
#ifdef KOKKOS_ENABLE_SYCL
  spaces.push_back("SYCL");
#endif
#ifdef KOKKOS_ENABLE_OPENMPTARGET
  spaces.push_back("OpenMPTarget");
#endif
#ifdef KOKKOS_ENABLE_OPENACC
  spaces.push_back("OpenACC");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  spaces.push_back("OpenMP");
#endif
#ifdef KOKKOS_ENABLE_THREADS
  spaces.push_back("Threads");
#endif
#ifdef KOKKOS_ENABLE_HPX
  spaces.push_back("HPX");
#endif
#ifdef KOKKOS_ENABLE_SERIAL
  spaces.push_back("Serial");
#endif
  return joined(spaces, "none");
}

// Kokkos Kernels' version (its headers record it from 4.0 on) and the
// third-party BLAS it was built with (its gemm calls them for the types
// they support).
std::string kokkos_kernels() {
#ifndef KLOSS_VERSION_HAS_KOKKOS_KERNELS
  return "off";
#else
#ifdef KOKKOSKERNELS_VERSION
  std::string s = dotted(KOKKOSKERNELS_VERSION);
#else
  std::string s = "3.x (its headers carry no version)";
#endif
  std::vector<std::string> tpls;
#ifdef KOKKOSKERNELS_ENABLE_TPL_CUBLAS
  tpls.push_back("cuBLAS");
#endif
#ifdef KOKKOSKERNELS_ENABLE_TPL_ROCBLAS
  tpls.push_back("rocBLAS");
#endif
#ifdef KOKKOSKERNELS_ENABLE_TPL_MKL
  tpls.push_back("MKL");
#endif
#ifdef KOKKOSKERNELS_ENABLE_TPL_ARMPL
  tpls.push_back("ArmPL");
#endif
#ifdef KOKKOSKERNELS_ENABLE_TPL_BLAS
  tpls.push_back("BLAS");
#endif
  return s + ", BLAS libraries: " + joined(tpls, "none (its own kernels)");
#endif
}

// The fused heads' product libraries compiled into kloss
// (kloss/head_products.hpp).
std::string head_products() {
  std::vector<std::string> libs;
#ifdef KLOSS_HAVE_ONEDNN
  libs.push_back("oneDNN");
#endif
#ifdef KLOSS_HAVE_CUBLAS
  libs.push_back("cuBLAS");
#endif
#ifdef KLOSS_HAVE_ROCBLAS
  libs.push_back("rocBLAS");
#endif
#ifdef KLOSS_VERSION_HAS_KOKKOS_KERNELS
  libs.push_back("Kokkos Kernels");
#endif
  return joined(libs, "none");
}

// The first line of MPI_Get_library_version (which MPI allows before
// MPI_Init and after MPI_Finalize), trailing blanks removed.
std::string mpi_library() {
#ifdef KLOSS_HAVE_MPI
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "unknown (MPI_Get_library_version failed)";
  std::string s(buf, static_cast<std::size_t>(len > 0 ? len : 0));
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\0' || s.back() == '\r')) s.pop_back();
  return s + " (MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION) + ")";
#else
  return "off";
#endif
}

std::string hdf5_library() {
#ifdef KLOSS_HAVE_HDF5
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown (H5get_libversion failed)";
  std::string s = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
#ifdef H5_HAVE_PARALLEL
  s += " (parallel)";
#endif
  return s;
#else
  return "off";
#endif
}

}  // namespace

std::string version() { return KLOSS_VERSION_STRING; }

std::string git_hash() { return KLOSS_GIT_HASH; }

std::vector<std::pair<std::string, std::string>> configuration() {
  return {
      {"kloss_version", version()},
      {"git_hash", git_hash()},
      {"kokkos_version", dotted(KOKKOS_VERSION)},
      {"execution_spaces", execution_spaces()},
      {"default_execution_space", Kokkos::DefaultExecutionSpace::name()},
      {"kokkos_kernels", kokkos_kernels()},
      {"head_products", head_products()},
      {"head_products_float32", head_products_description("float32")},
      {"mpi", mpi_library()},
      {"hdf5", hdf5_library()},
  };
}

void print_configuration(std::ostream& os) {
  os << "kloss " << version() << " (git " << git_hash() << ")\n";
  for (const auto& [key, value] : configuration())
    if (key != "kloss_version" && key != "git_hash") os << "  " << key << ": " << value << "\n";
}

}  // namespace kloss
