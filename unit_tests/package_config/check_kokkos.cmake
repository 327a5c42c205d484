# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ctest package_config_kokkos_check: kloss_check_kokkos (cmake/KlossCheckKokkos.cmake),
# which klossConfig.cmake runs, accepts the Kokkos kloss was built with and
# refuses another version or another set of devices with a message naming both.
#   cmake -DKLOSS_SOURCE_DIR=<src> -P check_kokkos.cmake
include(${KLOSS_SOURCE_DIR}/cmake/KlossCheckKokkos.cmake)

function(expect_ok built_v built_d found_v found_d)
  kloss_check_kokkos(msg "${built_v}" "${built_d}" /built "${found_v}" "${found_d}" /found)
  if(msg)
    message(FATAL_ERROR "expected a match for ${built_v} [${built_d}] vs ${found_v} [${found_d}], got: ${msg}")
  endif()
endfunction()

function(expect_refused built_v built_d found_v found_d)
  kloss_check_kokkos(msg "${built_v}" "${built_d}" /built "${found_v}" "${found_d}" /found)
  if(NOT msg)
    message(FATAL_ERROR "expected a refusal for ${built_v} [${built_d}] vs ${found_v} [${found_d}]")
  endif()
  foreach(want IN LISTS ARGN)
    string(FIND "${msg}" "${want}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "the refusal does not say '${want}': ${msg}")
    endif()
  endforeach()
endfunction()

expect_ok(3.4.01 SERIAL 3.4.01 SERIAL)
expect_ok(4.7.01 "CUDA;SERIAL" 4.7.00 "SERIAL;CUDA")  # a patch release, devices in any order
expect_refused(4.7.01 "CUDA;SERIAL" 3.4.01 SERIAL
  "version 3.4.01, kloss was built with 4.7.01" "devices SERIAL, kloss was built with CUDA,SERIAL"
  "Kokkos_ROOT" "/built" "/found")
expect_refused(4.7.01 OPENMP 4.7.01 "CUDA;OPENMP" "devices CUDA,OPENMP, kloss was built with OPENMP")
expect_refused(4.6.00 SERIAL 4.7.00 SERIAL "version 4.7.00, kloss was built with 4.6.00")
message(STATUS "package_config_kokkos_check: 5 cases passed")
