# Installs the build into PREFIX and checks that the programs, the icon, the .desktop entry and
# the sample dump are in place and that the installed CLI runs (its RPATH finds LibTorch).
# Usage: cmake -DBUILD=<build dir> -DPREFIX=<empty dir> -P check_install.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${PREFIX}"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD} --prefix ${PREFIX} failed: ${rc}")
endif()

set(expected
  bin/attnscope
  bin/attnscope-cli
  share/applications/attnscope.desktop
  share/icons/hicolor/scalable/apps/attnscope.svg
  share/attnscope/samples/seed_cases.h5)
foreach(f IN LISTS expected)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "missing after install: ${PREFIX}/${f}")
  endif()
endforeach()

file(STRINGS "${PREFIX}/share/applications/attnscope.desktop" desktop)
foreach(line "Exec=attnscope %F" "Icon=attnscope" "Type=Application")
  if(NOT line IN_LIST desktop)
    message(FATAL_ERROR "attnscope.desktop lacks '${line}'")
  endif()
endforeach()

execute_process(COMMAND "${PREFIX}/bin/attnscope-cli" info
                        "${PREFIX}/share/attnscope/samples/seed_cases.h5"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "/fp16_score_overflow")
  message(FATAL_ERROR "installed attnscope-cli info failed (${rc}): ${err}")
endif()
execute_process(COMMAND "${PREFIX}/bin/attnscope" --help
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "attnscope")
  message(FATAL_ERROR "installed attnscope --help failed (${rc}): ${err}")
endif()
message(STATUS "install into ${PREFIX}: programs, icon, .desktop entry and sample in place")
