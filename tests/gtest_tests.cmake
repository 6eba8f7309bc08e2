# attnscope_gtests(TARGET [TEST_PREFIX prefix] [PROPERTIES prop value ...]): registers the
# GoogleTest executable TARGET with CTest, at the grain ATTNSCOPE_TEST_UNIT names:
#   test   one CTest test per test (gtest_discover_tests; names PREFIX<Suite>.<test>)
#   suite  one CTest test per test suite (names PREFIX<Suite>.*, run with --gtest_filter),
#          listed from the executable after each link (gtest_suite_list.cmake). Every test
#          still runs; a process start (LibTorch, and ASan's start-up under scripts/sanitize.sh)
#          is paid once per suite instead of once per test.
set(ATTNSCOPE_TEST_UNIT test CACHE STRING "CTest grain of GoogleTest executables: test or suite")
set_property(CACHE ATTNSCOPE_TEST_UNIT PROPERTY STRINGS test suite)
if(NOT ATTNSCOPE_TEST_UNIT MATCHES "^(test|suite)$")
  message(FATAL_ERROR "ATTNSCOPE_TEST_UNIT is '${ATTNSCOPE_TEST_UNIT}'; use test or suite")
endif()
set(ATTNSCOPE_GTEST_SUITE_LIST ${CMAKE_CURRENT_LIST_DIR}/gtest_suite_list.cmake)

function(attnscope_gtests target)
  cmake_parse_arguments(ARG "" "TEST_PREFIX" "PROPERTIES" ${ARGN})
  if(ATTNSCOPE_TEST_UNIT STREQUAL "test")
    gtest_discover_tests(${target} TEST_PREFIX "${ARG_TEST_PREFIX}" DISCOVERY_TIMEOUT 120
      PROPERTIES ${ARG_PROPERTIES})
    return()
  endif()
  set(list_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake)
  string(REPLACE ";" "|" properties "${ARG_PROPERTIES}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DOUT=${list_file}
            -DPREFIX=${ARG_TEST_PREFIX} -DPROPERTIES=${properties}
            -P ${ATTNSCOPE_GTEST_SUITE_LIST}
    BYPRODUCTS ${list_file}
    VERBATIM)
  file(WRITE ${include_file}
    "if(EXISTS [=[${list_file}]=])\n  include([=[${list_file}]=])\n"
    "else()\n  add_test([=[${ARG_TEST_PREFIX}NOT_BUILT]=] [=[${target}_NOT_BUILT]=])\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
