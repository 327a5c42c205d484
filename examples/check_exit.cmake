# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs a command and checks its exit status exactly, and what it printed:
#
#   cmake -DEXIT_CODE=2 [-DSTDOUT_MATCHES=REGEX] [-DSTDERR_MATCHES=REGEX]
#         [-DSTDERR_NOT_MATCHES=REGEX] [-DONCE=REGEX] -P check_exit.cmake -- COMMAND [ARG...]
#
# STDOUT_MATCHES / STDERR_MATCHES must match the command's stdout / stderr,
# STDERR_NOT_MATCHES must not match its stderr, and ONCE must match stdout
# and stderr together exactly once (under mpirun: one rank printed).
# (ctest's WILL_FAIL passes any non-zero status, a crash included.)
include(${CMAKE_CURRENT_LIST_DIR}/args_after_dashes.cmake)
set(_cmd ${_args_after_dashes})
if(NOT _cmd OR NOT DEFINED EXIT_CODE)
  message(FATAL_ERROR "usage: cmake -DEXIT_CODE=N [-DSTDOUT_MATCHES=RE] [-DSTDERR_MATCHES=RE] "
                      "[-DSTDERR_NOT_MATCHES=RE] [-DONCE=RE] -P check_exit.cmake -- COMMAND [ARG...]")
endif()

execute_process(COMMAND ${_cmd} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
string(REPLACE ";" " " _shown "${_cmd}")
set(_report "command: ${_shown}\nexit status: ${_rc}\n--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
if(NOT _rc STREQUAL "${EXIT_CODE}")
  message(FATAL_ERROR "expected exit status ${EXIT_CODE}\n${_report}")
endif()
if(DEFINED STDOUT_MATCHES AND NOT _out MATCHES "${STDOUT_MATCHES}")
  message(FATAL_ERROR "stdout does not match '${STDOUT_MATCHES}'\n${_report}")
endif()
if(DEFINED STDERR_MATCHES AND NOT _err MATCHES "${STDERR_MATCHES}")
  message(FATAL_ERROR "stderr does not match '${STDERR_MATCHES}'\n${_report}")
endif()
if(DEFINED STDERR_NOT_MATCHES AND _err MATCHES "${STDERR_NOT_MATCHES}")
  message(FATAL_ERROR "stderr matches '${STDERR_NOT_MATCHES}'\n${_report}")
endif()
if(DEFINED ONCE)
  string(REGEX MATCHALL "${ONCE}" _hits "${_out}${_err}")
  list(LENGTH _hits _n)
  if(NOT _n EQUAL 1)
    message(FATAL_ERROR "'${ONCE}' printed ${_n} times, expected once\n${_report}")
  endif()
endif()
message(STATUS "exit status ${_rc} as expected: ${_shown}")
