# attnscope_qt_tests(TARGET PREFIX TIMEOUT [ENVIRONMENT ...] [EXTRA_LABELS regex=label ...]):
# each test function of the Qt Test executable TARGET becomes the CTest test PREFIX<function>
# (label gui, QT_QPA_PLATFORM=offscreen, Qt Test's function timeout at TIMEOUT, plus ENVIRONMENT),
# registered from the executable's own list of functions after each link (qt_test_list.cmake), so
# a test is written once, in its class. A test whose function matches an EXTRA_LABELS regex also
# carries that label.
set(ATTNSCOPE_QT_TEST_LIST ${CMAKE_CURRENT_LIST_DIR}/qt_test_list.cmake)

function(attnscope_qt_tests target prefix timeout)
  cmake_parse_arguments(ARG "" "" "ENVIRONMENT;EXTRA_LABELS" ${ARGN})
  set(list_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake)
  # Lists travel through the command line with | for ;.
  # Qt Test's own watchdog (QTEST_FUNCTION_TIMEOUT, 300 s by default) would abort a function
  # before CTest's TIMEOUT and the tests' own waits (up to 600 s on a loaded machine, where the
  # background analyses get little CPU): it gets CTest's limit.
  math(EXPR function_timeout_ms "${timeout} * 1000")
  set(environment QT_QPA_PLATFORM=offscreen QTEST_FUNCTION_TIMEOUT=${function_timeout_ms}
      ${ARG_ENVIRONMENT})
  string(REPLACE ";" "|" environment "${environment}")
  string(REPLACE ";" "|" extra_labels "${ARG_EXTRA_LABELS}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DOUT=${list_file}
            -DPREFIX=${prefix} -DTIMEOUT=${timeout} -DLABELS=gui
            -DENVIRONMENT=${environment} -DEXTRA_LABELS=${extra_labels}
            -P ${ATTNSCOPE_QT_TEST_LIST}
    BYPRODUCTS ${list_file}
    VERBATIM)
  file(WRITE ${include_file}
    "if(EXISTS [=[${list_file}]=])\n  include([=[${list_file}]=])\n"
    "else()\n  add_test([=[${prefix}NOT_BUILT]=] [=[${target}_NOT_BUILT]=])\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
