# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# kloss_check_kokkos(<out> <built_version> <built_devices> <built_dir>
#                    <found_version> <found_devices> <found_dir>)
# sets <out> to an empty string when the Kokkos a consumer found can link the
# kloss that was built (the same major.minor version, the same enabled
# devices: kloss's explicit instantiations are for the default execution
# space of the Kokkos it was built with), else to the message that says what
# differs and what to do. klossConfig.cmake calls it after finding Kokkos;
# unit_tests/package_config/check_kokkos.cmake tests it.
include_guard(GLOBAL)

function(kloss_check_kokkos out built_version built_devices built_dir found_version found_devices found_dir)
  set(_why "")
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _built_mm "${built_version}")
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _found_mm "${found_version}")
  if(NOT _found_mm STREQUAL _built_mm)
    string(APPEND _why "version ${found_version}, kloss was built with ${built_version}")
  endif()
  set(_b ${built_devices})
  set(_f ${found_devices})
  list(SORT _b)
  list(SORT _f)
  if(NOT _b STREQUAL _f)
    if(_why)
      string(APPEND _why "; ")
    endif()
    string(REPLACE ";" "," _bs "${_b}")
    string(REPLACE ";" "," _fs "${_f}")
    string(APPEND _why "devices ${_fs}, kloss was built with ${_bs}")
  endif()
  if(_why)
    set(${out}
        "kloss: the Kokkos found (${found_dir}) does not match the one kloss was built with: ${_why}. "
        "Point Kokkos_ROOT at the Kokkos kloss was built with (${built_dir}), or build kloss against this one."
        PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()
