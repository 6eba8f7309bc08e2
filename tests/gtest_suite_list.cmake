# Writes the CTest file of one GoogleTest executable at suite grain (see gtest_tests.cmake):
# one test PREFIX<Suite>.* per suite that `EXE --gtest_list_tests` names.
#   EXE  OUT  PREFIX  PROPERTIES (|-separated "prop|value|..." for set_tests_properties)
execute_process(COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
                        ${EXE} --gtest_list_tests
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}): ${err}")
endif()
# Suite lines start in column 0 and end with '.', optionally followed by "  # TypeParam = ...".
string(REGEX MATCHALL "(^|\n)[^ \n#][^ \n]*\\." suites "${listing}")
if(NOT suites)
  message(FATAL_ERROR "${EXE} --gtest_list_tests listed no test suite")
endif()
string(REPLACE "|" " " properties "${PROPERTIES}")

set(script "")
foreach(suite IN LISTS suites)
  string(STRIP "${suite}" suite)
  set(name "${PREFIX}${suite}*")
  string(APPEND script "add_test([=[${name}]=] [=[${EXE}]=] [=[--gtest_filter=${suite}*]=])\n")
  if(properties)
    string(APPEND script "set_tests_properties([=[${name}]=] PROPERTIES ${properties})\n")
  endif()
endforeach()
file(WRITE "${OUT}" "${script}")
