# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Normalises whatever Kokkos / Kokkos Kernels install was found into two clean
# imported targets, Kokkos::kokkos and Kokkos::kokkoskernels, so that the rest
# of the build (and every downstream project, through klossConfig.cmake) sees
# one shape whatever the install.
#
# Debian 12 ships Kokkos 3.4.01 inside Trilinos (libtrilinos-kokkos-dev). Its
# Kokkos::kokkos target names a non-existent include directory
# (/usr/lib/include) and puts "-DKOKKOS_DEPENDENCE" among its link libraries;
# the working imported targets are trilinos_kokkoscore & co., which carry no
# include directory at all. Kokkos 4.x exports Kokkos::kokkos and
# Kokkos::kokkoskernels that are correct as they are.
include_guard(GLOBAL)

find_package(Kokkos REQUIRED)

if(TARGET trilinos_kokkoscore)
  # Trilinos-packaged Kokkos: rebuild Kokkos::kokkos from the real targets.
  set(_kloss_kokkos_inc "${Kokkos_INCLUDE_DIRS}")
  if(NOT _kloss_kokkos_inc)
    set(_kloss_kokkos_inc "/usr/include/trilinos")
  endif()
  get_filename_component(_kloss_kokkos_inc "${_kloss_kokkos_inc}" REALPATH)
  set_target_properties(Kokkos::kokkos PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_kloss_kokkos_inc}"
    INTERFACE_LINK_LIBRARIES "trilinos_kokkoscontainers;trilinos_kokkoscore"
    INTERFACE_COMPILE_FEATURES "cxx_std_17"
    INTERFACE_COMPILE_OPTIONS "")
  set(KLOSS_KOKKOS_FLAVOUR "trilinos")
else()
  set(KLOSS_KOKKOS_FLAVOUR "standalone")
endif()

if(NOT TARGET Kokkos::kokkoskernels)
  # The Kokkos Kernels installed beside the Kokkos found above comes first:
  # a Kokkos_ROOT pointing at a CUDA build must not pair it with the
  # system's (Debian's Serial) Kokkos Kernels.
  get_filename_component(_kloss_kokkos_cmake_dir "${Kokkos_DIR}" DIRECTORY)
  find_package(KokkosKernels REQUIRED HINTS "${_kloss_kokkos_cmake_dir}/KokkosKernels")
  if(TARGET trilinos_kokkoskernels AND NOT TARGET Kokkos::kokkoskernels)
    add_library(Kokkos::kokkoskernels INTERFACE IMPORTED)
    set_target_properties(Kokkos::kokkoskernels PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${_kloss_kokkos_inc}"
      INTERFACE_LINK_LIBRARIES "trilinos_kokkoskernels;Kokkos::kokkos")
  endif()
endif()
if(NOT TARGET Kokkos::kokkoskernels)
  message(FATAL_ERROR "kloss: Kokkos Kernels was found but exports no usable target")
endif()

# Does the Kokkos install choose a host architecture itself? Kokkos 4.x lists
# the enabled architectures in Kokkos_ARCH; Debian's lists none, which leaves
# kernels at the compiler's baseline (SSE2 on x86-64).
if(Kokkos_ARCH)
  set(KLOSS_KOKKOS_SETS_ARCH ON)
else()
  set(KLOSS_KOKKOS_SETS_ARCH OFF)
endif()
