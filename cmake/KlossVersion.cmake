# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# kloss/version.hpp: project(VERSION) and the git commit the build is
# configured from, configured from include/kloss/version.hpp.in into the
# build tree's include directory (on the kloss target's include path) and
# installed beside the other headers. Included by src/CMakeLists.txt once
# the kloss target exists.
#
# The hash is read at configure time: a commit made after it shows only when
# CMake runs again. "-dirty" marks tracked files that differed from the
# commit; "unknown" a source tree that is not a git checkout of kloss's own
# (a tarball, or a copy inside another project's repository).
include_guard(GLOBAL)

set(KLOSS_GIT_HASH unknown)
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --show-toplevel
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} RESULT_VARIABLE _kloss_git_rc
    OUTPUT_VARIABLE _kloss_git_top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_kloss_git_rc EQUAL 0)
    get_filename_component(_kloss_git_top "${_kloss_git_top}" REALPATH)
    get_filename_component(_kloss_src_top "${PROJECT_SOURCE_DIR}" REALPATH)
  endif()
  if(_kloss_git_rc EQUAL 0 AND _kloss_git_top STREQUAL _kloss_src_top)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} RESULT_VARIABLE _kloss_git_rc
      OUTPUT_VARIABLE _kloss_git_hash OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_kloss_git_rc EQUAL 0 AND _kloss_git_hash)
      set(KLOSS_GIT_HASH ${_kloss_git_hash})
      execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} RESULT_VARIABLE _kloss_git_rc
        OUTPUT_VARIABLE _kloss_git_changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_kloss_git_rc EQUAL 0 AND _kloss_git_changes)
        string(APPEND KLOSS_GIT_HASH "-dirty")
      endif()
    endif()
  endif()
endif()

set(KLOSS_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
configure_file(${PROJECT_SOURCE_DIR}/include/kloss/version.hpp.in
               ${KLOSS_GENERATED_INCLUDE_DIR}/kloss/version.hpp @ONLY)
target_include_directories(kloss PUBLIC $<BUILD_INTERFACE:${KLOSS_GENERATED_INCLUDE_DIR}>)
install(FILES ${KLOSS_GENERATED_INCLUDE_DIR}/kloss/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kloss)
message(STATUS "kloss ${PROJECT_VERSION} (git ${KLOSS_GIT_HASH})")
