# Runs the sample generator (with ARGS, optional) into OUT and fails unless OUT is
# byte-identical to EXPECTED.
execute_process(COMMAND ${GENERATOR} ${ARGS} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GENERATOR} failed with ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${EXPECTED} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "${OUT} differs from the committed ${EXPECTED}: regenerate it with "
                      "attnscope-make-samples ${ARGS} and commit the result")
endif()
