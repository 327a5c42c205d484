# Installs the built kloss into a scratch prefix, configures and builds the
# downstream project against it, and runs its programs.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${KLOSS_BINARY_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${KLOSS_SOURCE_DIR}/unit_tests/downstream -B ${WORK_DIR}/build
                -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DKokkos_DIR=${Kokkos_DIR} -DKokkosKernels_DIR=${KokkosKernels_DIR}
                -DCMAKE_BUILD_TYPE=Release RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configure of the downstream project failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "build of the downstream project failed")
endif()
# The C++ program always; the C and Fortran ones when kloss was built with
# them (KLOSS_WITH_C_API, KLOSS_WITH_FORTRAN), and then they must exist.
set(_programs downstream)
if(KLOSS_WITH_C_API)
  list(APPEND _programs downstream_c)
endif()
if(KLOSS_WITH_FORTRAN)
  list(APPEND _programs downstream_fortran)
endif()
foreach(p IN LISTS _programs)
  if(NOT EXISTS ${WORK_DIR}/build/${p})
    message(FATAL_ERROR "the downstream program ${p} was not built")
  endif()
  execute_process(COMMAND ${WORK_DIR}/build/${p} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "the downstream program ${p} failed")
  endif()
endforeach()
