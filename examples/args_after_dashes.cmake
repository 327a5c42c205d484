# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# For a script run as `cmake [-D...] -P script.cmake -- ARG...`: sets
# _args_after_dashes to the ARGs (include()d by check_exit.cmake and
# check_same_bits.cmake).
set(_args_after_dashes)
set(_seen_dashes OFF)
foreach(_i RANGE 1 ${CMAKE_ARGC})
  if(_i EQUAL CMAKE_ARGC)
    break()
  endif()
  if(_seen_dashes)
    list(APPEND _args_after_dashes "${CMAKE_ARGV${_i}}")
  elseif(CMAKE_ARGV${_i} STREQUAL "--")
    set(_seen_dashes ON)
  endif()
endforeach()
