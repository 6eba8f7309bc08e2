# Fails when a C++ / CUDA source of the project differs from the committed .clang-format (the
# style of DESIGN §8), listing the files with clang-format's first complaints. clang-format 14
# exactly: other versions format some constructs differently.
# Usage: cmake -DROOT=<source dir> -DCLANG_FORMAT=<clang-format-14> -P check_format.cmake
if(NOT CLANG_FORMAT)
  message(FATAL_ERROR "clang-format-14 not found: scripts/setup.sh installs it (Debian package "
                      "clang-format-14); then reconfigure the build")
endif()
set(files "")
foreach(dir app bench core fuzz kernels tests)
  file(GLOB_RECURSE found "${ROOT}/${dir}/*.h" "${ROOT}/${dir}/*.cpp" "${ROOT}/${dir}/*.cu"
       "${ROOT}/${dir}/*.cuh")
  list(APPEND files ${found})
endforeach()
list(LENGTH files count)
if(count LESS 100)
  message(FATAL_ERROR "only ${count} sources found below ${ROOT}: wrong ROOT?")
endif()
execute_process(COMMAND "${CLANG_FORMAT}" --dry-run --Werror --style=file ${files}
                RESULT_VARIABLE status ERROR_VARIABLE report)
if(NOT status EQUAL 0)
  string(REGEX MATCHALL "[^\n]*: error: [^\n]*" complaints "${report}")
  list(LENGTH complaints n)
  list(SUBLIST complaints 0 20 shown)
  list(JOIN shown "\n  " text)
  message(FATAL_ERROR "places that differ from .clang-format: ${n} (fix: clang-format-14 -i FILE)\n"
                      "  ${text}")
endif()
message(STATUS "${count} sources match .clang-format")
