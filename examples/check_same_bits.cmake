# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs sim_surrogate under mpirun on each rank count of RANKS and checks that
# every run printed the same bits of its first objective (the sharded calls'
# reproducible mode: the same loss on any number of ranks):
#
#   cmake -DMPIEXEC=mpirun "-DMPIEXEC_FLAGS=..." -DRANKS=1;2;3 -DPROGRAM=sim_surrogate
#         -P check_same_bits.cmake -- ARG...
include(${CMAKE_CURRENT_LIST_DIR}/args_after_dashes.cmake)
set(_args ${_args_after_dashes})
if(NOT DEFINED MPIEXEC OR NOT DEFINED RANKS OR NOT DEFINED PROGRAM)
  message(FATAL_ERROR "usage: cmake -DMPIEXEC=... [-DMPIEXEC_FLAGS=...] -DRANKS=1;2;3 -DPROGRAM=... "
                      "-P check_same_bits.cmake -- ARG...")
endif()
set(_first "")
foreach(_np IN LISTS RANKS)
  execute_process(COMMAND ${MPIEXEC} ${MPIEXEC_FLAGS} -np ${_np} ${PROGRAM} ${_args}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${_np} rank(s): exit status ${_rc}\n--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
  endif()
  if(NOT _out MATCHES "first objective ([^ ]+) \\(bits ([0-9a-f]+)\\)")
    message(FATAL_ERROR "${_np} rank(s) printed no first objective\n--- stdout ---\n${_out}")
  endif()
  message(STATUS "${_np} rank(s): first objective ${CMAKE_MATCH_1}, bits ${CMAKE_MATCH_2}")
  if(_first STREQUAL "")
    set(_first "${CMAKE_MATCH_2}")
  elseif(NOT _first STREQUAL CMAKE_MATCH_2)
    message(FATAL_ERROR "${_np} rank(s) gave bits ${CMAKE_MATCH_2}, the first run ${_first}")
  endif()
endforeach()
