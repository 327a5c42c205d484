# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs Doxygen for the `docs` target and checks its warnings (cmake -P):
#   -DDOXYGEN=<doxygen> -DDOXYFILE=<Doxyfile> -DWARN_LOG=<its WARN_LOGFILE>
#   -DSOURCE_DIR=<kloss source> "-DPENDING=<header;...>"
# Every warning is printed. The run fails on a warning in any file but the
# PENDING headers (public headers whose doc comments are being written;
# their warnings are printed and counted), and on a PENDING header that has
# no warning left, which then belongs off the list.
cmake_minimum_required(VERSION 3.16)
file(REMOVE ${WARN_LOG})
execute_process(COMMAND ${DOXYGEN} ${DOXYFILE} RESULT_VARIABLE rc)
set(_log "")
if(EXISTS ${WARN_LOG})
  file(READ ${WARN_LOG} _log)
endif()
if(NOT _log STREQUAL "")
  message("${_log}")
endif()

# A warning starts with "<path>:<line>: "; lines that do not are the
# continuation of the one before.
string(REPLACE ";" "," _log_lines "${_log}")
string(REPLACE "\n" ";" _log_lines "${_log_lines}")
set(_blocking 0)
foreach(_p IN LISTS PENDING)
  string(MAKE_C_IDENTIFIER "${_p}" _id)
  set(_count_${_id} 0)
endforeach()
set(_placed FALSE)
foreach(_line IN LISTS _log_lines)
  if(_line MATCHES "^([^:]+):[0-9]+: ")
    set(_placed TRUE)
    file(RELATIVE_PATH _rel ${SOURCE_DIR} ${CMAKE_MATCH_1})
    if(_rel IN_LIST PENDING)
      string(MAKE_C_IDENTIFIER "${_rel}" _id)
      math(EXPR _count_${_id} "${_count_${_id}} + 1")
    else()
      math(EXPR _blocking "${_blocking} + 1")
    endif()
  elseif(NOT _placed AND NOT _line STREQUAL "")
    math(EXPR _blocking "${_blocking} + 1")  # a warning without a place
  endif()
endforeach()

set(_failed FALSE)
foreach(_p IN LISTS PENDING)
  string(MAKE_C_IDENTIFIER "${_p}" _id)
  if(_count_${_id} EQUAL 0)
    message("docs: ${_p} has no Doxygen warning left: take it off KLOSS_DOCS_PENDING (docs/CMakeLists.txt)")
    set(_failed TRUE)
  else()
    message("docs: ${_count_${_id}} warnings in ${_p}, pending (KLOSS_DOCS_PENDING in docs/CMakeLists.txt)")
  endif()
endforeach()
if(_blocking GREATER 0)
  message("docs: ${_blocking} warnings outside the pending headers: document what they name")
  set(_failed TRUE)
elseif(rc AND _log STREQUAL "")
  message("docs: doxygen failed (exit status ${rc}) without a warning")
  set(_failed TRUE)
endif()
if(_failed)
  message(FATAL_ERROR "docs: the API reference check failed")
endif()
message("docs: the API reference check passed")
