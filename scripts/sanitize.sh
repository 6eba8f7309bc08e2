#!/usr/bin/env bash
# Builds the whole project with AddressSanitizer + UndefinedBehaviorSanitizer in its own build
# directory and runs the whole test suite there. Compiled by clang-14 (installed by setup.sh for
# the fuzzers): with the sanitizers it compiles this tree in about two thirds of gcc's time
# (cpu_accuracy_test.cpp 12.1 -> 5.3 s, case_analysis.cpp 12.9 -> 7.2 s). -O1 -g1 (line tables
# only): reports keep file:line frames. Any ASan / UBSan report fails the run; LeakSanitizer
# suppressions (tests/robustness/lsan.supp) cover third-party libraries only.
# CUDA stays off here: device code cannot be instrumented, the CUDA runtime needs ASan's shadow
# gap unprotected, and the gpu-labelled tests run (unsanitized) in the normal build. The
# kernel stages' contracts (ATTNSCOPE_DCHECK, kernels/attn_check.h) are checked here
# (-DATTNSCOPE_KERNEL_DCHECKS=ON).
# GoogleTest executables are registered one CTest test per suite (ATTNSCOPE_TEST_UNIT=suite):
# every test still runs, and the sanitized process start-up (LibTorch) is paid once per suite.
#   ATTNSCOPE_ASAN_BUILD  build dir (default ./build-asan)
#   ATTNSCOPE_JOBS        build / ctest parallelism (default nproc)
# Extra arguments go to ctest (e.g. -R io.).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ATTNSCOPE_ASAN_BUILD:-$ROOT/build-asan}"
JOBS="${ATTNSCOPE_JOBS:-$(nproc)}"
VENV="${ATTNSCOPE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/attnscope/venv}"
log() { echo "[attnscope sanitize] $*" >&2; }
source "$ROOT/scripts/build_env.sh"

# Packages and the venv (setup.sh is idempotent; it also builds ./build, incrementally).
bash "$ROOT/scripts/setup.sh"

FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
if [[ ! -f "$BUILD/build.ninja" ]]; then
  prefix="$("$VENV/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  log "configuring $BUILD"
  CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_PREFIX_PATH="$prefix" -DPython3_EXECUTABLE="$VENV/bin/python" \
    -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_CXX_FLAGS="$FLAGS" $(attnscope_launcher_args) \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DATTNSCOPE_WITH_CUDA=OFF -DATTNSCOPE_TEST_UNIT=suite -DATTNSCOPE_KERNEL_DCHECKS=ON \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
fi
attnscope_stage "sanitize: build $BUILD ($JOBS jobs)" cmake --build "$BUILD" -j "$JOBS"

# halt_on_error + exitcode make every report a failing test; detect_leaks with third-party
# suppressions.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:exitcode=86"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=87:suppressions=$ROOT/tests/robustness/ubsan.supp"
export LSAN_OPTIONS="suppressions=$ROOT/tests/robustness/lsan.supp:print_suppressions=0"
export QT_QPA_PLATFORM=offscreen
cd "$BUILD"
# The instruction-set runs (issue 17) all run in the normal build; here only the forced AVX2
# and SSE4 kernel tests, whose 8- and 4-lane tails the default run (the CPU's widest set) does
# not reach. Skipped here: the scalar SSE2 set (334 s under ASan, no vector tails), the forced
# AVX-512 runs (the default on AVX-512 CPUs runs one of them, and both share Highway's AVX-512
# code), the variant harness and the CLI per set (results, not memory safety), and the runs on
# emulated CPUs (*_on_emulated_*: results again, at qemu's 50x slowdown).
SKIP_UNDER_ASAN='^(kernels_cpu_isa_(sse2|avx512|avx512bf16)|cpu_variants_isa_.*|cli_scan_same_findings_under_every_cpu_isa|.*_on_emulated_.*)$'
attnscope_stage "sanitize: tests (ctest)" ctest --output-on-failure -j "$JOBS" --timeout 1500 \
  -E "$SKIP_UNDER_ASAN" "$@"
