# attnscope_emulated_test(NAME MODEL TARGET [ARGS ...] [ENVIRONMENT var=value ...]
#                         [PROPERTIES prop value ...]): the CTest
# test NAME_on_emulated_<model> (the model's name up to its first '-', lower case) runs the
# executable TARGET with ARGS under qemu-x86_64 -cpu MODEL (Debian's qemu-user), whose CPUID
# offers only that model's instruction sets and which faults on any other: one binary tried on
# CPUs this machine is not. TCG emulates no AVX-512 or AMX, so those paths run on the host only.
# The test holds both cores (PROCESSORS 2: minutes of two busy cores would slow the GUI tests'
# background analyses, app/gui/TaskRunner.h, to a tenth of a core) and starts early (COST: qemu
# is about 45x slower than the host).
find_program(ATTNSCOPE_QEMU_X86_64 NAMES qemu-x86_64 REQUIRED)

function(attnscope_emulated_test name model target)
  cmake_parse_arguments(ARG "" "" "ARGS;ENVIRONMENT;PROPERTIES" ${ARGN})
  string(REGEX REPLACE "-.*" "" short "${model}")
  string(TOLOWER "${short}" short)
  add_test(NAME ${name}_on_emulated_${short}
    COMMAND ${ATTNSCOPE_QEMU_X86_64} -cpu ${model} $<TARGET_FILE:${target}> ${ARG_ARGS})
  set_tests_properties(${name}_on_emulated_${short} PROPERTIES PROCESSORS 2 COST 100
    ENVIRONMENT "${ARG_ENVIRONMENT}" ${ARG_PROPERTIES})
endfunction()
