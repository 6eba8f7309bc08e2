# Writes the CTest file of one Qt Test executable from what it says it contains
# (`EXE -functions`): one test PREFIX<function> per test function (see qt_tests.cmake).
#   EXE  OUT  PREFIX  TIMEOUT  LABELS, ENVIRONMENT (|-separated lists)
#   EXTRA_LABELS  |-separated "regex=label" pairs: a test whose function matches regex also
#                 carries label.
execute_process(COMMAND ${CMAKE_COMMAND} -E env QT_QPA_PLATFORM=offscreen
                        ASAN_OPTIONS=detect_leaks=0 ${EXE} -functions
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} -functions failed (${rc}): ${err}")
endif()
string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*\\(\\)" functions "${listing}")
if(NOT functions)
  message(FATAL_ERROR "${EXE} -functions listed no test function")
endif()
foreach(var LABELS ENVIRONMENT EXTRA_LABELS)
  string(REPLACE "|" ";" ${var} "${${var}}")
endforeach()

set(script "")
foreach(f IN LISTS functions)
  string(REPLACE "()" "" name "${f}")
  set(labels ${LABELS})
  foreach(pair IN LISTS EXTRA_LABELS)
    string(REPLACE "=" ";" pair "${pair}")
    list(GET pair 0 pattern)
    list(GET pair 1 label)
    if(name MATCHES "${pattern}")
      list(APPEND labels ${label})
    endif()
  endforeach()
  string(APPEND script
    "add_test([=[${PREFIX}${name}]=] [=[${EXE}]=] [=[${name}]=])\n"
    "set_tests_properties([=[${PREFIX}${name}]=] PROPERTIES TIMEOUT ${TIMEOUT} "
    "LABELS [=[${labels}]=] ENVIRONMENT [=[${ENVIRONMENT}]=])\n")
endforeach()
file(WRITE "${OUT}" "${script}")
