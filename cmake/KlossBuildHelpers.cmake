# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Helpers of kloss' own build and of its test scripts (not installed).

# option(<name> "<doc>") whose default is ON where the condition given after
# <doc> holds (an if() expression), else OFF.
function(kloss_option_if name doc)
  if(${ARGN})
    option(${name} "${doc}" ON)
  else()
    option(${name} "${doc}" OFF)
  endif()
endfunction()

# Sets <out> to <cxx>, then <c> where <with_c> is true and <fortran> where
# <with_fortran> is true: the parts of kloss that follow its C API and
# Fortran module.
function(kloss_language_list out with_c with_fortran cxx c fortran)
  set(_list ${cxx})
  if(with_c)
    list(APPEND _list ${c})
  endif()
  if(with_fortran)
    list(APPEND _list ${fortran})
  endif()
  set(${out} ${_list} PARENT_SCOPE)
endfunction()
