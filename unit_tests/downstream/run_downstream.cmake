# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs the built kloss into a scratch prefix, configures and builds the
# downstream project against it, and runs its programs.
include(${KLOSS_SOURCE_DIR}/cmake/KlossBuildHelpers.cmake)

# Runs the command given after <what>; stops with "<what> failed" where it
# fails.
function(run_or_fail what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${what} failed")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run_or_fail("install" ${CMAKE_COMMAND} --install ${KLOSS_BINARY_DIR} --prefix ${WORK_DIR}/prefix)
run_or_fail("configure of the downstream project"
            ${CMAKE_COMMAND} -S ${KLOSS_SOURCE_DIR}/unit_tests/downstream -B ${WORK_DIR}/build
            -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DKokkos_DIR=${Kokkos_DIR} -DKokkosKernels_DIR=${KokkosKernels_DIR}
            -DCMAKE_BUILD_TYPE=Release)
run_or_fail("build of the downstream project" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
# The C++ program always; the C and Fortran ones when kloss was built with
# them (KLOSS_WITH_C_API, KLOSS_WITH_FORTRAN), and then they must exist.
kloss_language_list(_programs "${KLOSS_WITH_C_API}" "${KLOSS_WITH_FORTRAN}" downstream downstream_c downstream_fortran)
foreach(p IN LISTS _programs)
  if(NOT EXISTS ${WORK_DIR}/build/${p})
    message(FATAL_ERROR "the downstream program ${p} was not built")
  endif()
  run_or_fail("the downstream program ${p}" ${WORK_DIR}/build/${p})
endforeach()

# The Makefile consumer (make_consumer/Makefile): the same install through
# its pkg-config files, kloss.pc, kloss_c.pc and kloss_f.pc, without CMake.
find_program(KLOSS_MAKE NAMES gmake make)
find_program(KLOSS_PKG_CONFIG NAMES pkg-config pkgconf)
if(NOT KLOSS_MAKE OR NOT KLOSS_PKG_CONFIG)
  message(FATAL_ERROR "the Makefile consumer needs make and pkg-config")
endif()
file(GLOB_RECURSE _kloss_pc ${WORK_DIR}/prefix/*/pkgconfig/kloss.pc)
if(NOT _kloss_pc)
  message(FATAL_ERROR "kloss.pc was not installed under ${WORK_DIR}/prefix")
endif()
list(GET _kloss_pc 0 _kloss_pc)
get_filename_component(_kloss_pc_dir ${_kloss_pc} DIRECTORY)
file(MAKE_DIRECTORY ${WORK_DIR}/make)
run_or_fail("the Makefile consumer"
            ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${_kloss_pc_dir} PKG_CONFIG=${KLOSS_PKG_CONFIG}
            ${KLOSS_MAKE} -C ${WORK_DIR}/make -f ${KLOSS_SOURCE_DIR}/unit_tests/downstream/make_consumer/Makefile)
