#!/usr/bin/env bash
# Device check on a CUDA machine (no Qt, no HDF5 needed): configures kernels, core, bench and the
# CUDA tests against the LibTorch of `python3`'s torch for sm_90, builds them with all cores,
# runs the CUDA unit tests, `ctest -L gpu` and the GPU part of attnscope-bench, and writes logs
# (at most 8 files) and the bench JSON to $OUT (or ./gpu-check-out when $OUT is unset).
# Environment: ATTNSCOPE_GPU_BUILD (build dir, default ./build-gpu), CUDA_ARCHS (default 90),
# PYTHON (default python3), GTEST_SRC (a googletest source tree, used when CMake finds no
# installed GTest; default /usr/src/googletest, then ./.gpu_deps/googletest).
# Highway (the CPU kernels' vector code) comes from the system, else from ./.gpu_deps/hwy: a copy
# of Debian's libhwy-dev / libhwy1 files that `scripts/gpu_check.sh --carry-hwy` makes on a
# Debian machine, for the device tool's `carry` (the GPU machine has no Debian packages).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/gpu-check-out}"
BUILD="${ATTNSCOPE_GPU_BUILD:-$ROOT/build-gpu}"
PYTHON="${PYTHON:-python3}"
ARCHS="${CUDA_ARCHS:-90}"
JOBS="$(nproc)"
if [[ "${1:-}" == "--carry-hwy" ]]; then
  rm -rf "$ROOT/.gpu_deps/hwy"
  dpkg -L libhwy-dev libhwy1 | while read -r f; do
    [[ -f "$f" || -L "$f" ]] || continue
    mkdir -p "$ROOT/.gpu_deps/hwy$(dirname "$f")"
    cp -P "$f" "$ROOT/.gpu_deps/hwy$f"
  done
  echo "Highway copied to $ROOT/.gpu_deps/hwy (carry .gpu_deps/hwy to the device)" >&2
  exit 0
fi
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

log() { echo "[gpu_check $(date +%T)] $*" | tee -a "$SUMMARY" >&2; }
# step NAME LOGFILE CMD...: runs CMD with its output in $OUT/LOGFILE, records time and status.
step() {
  local name="$1" file="$2" start rc
  shift 2
  start=$(date +%s)
  set +e
  "$@" >"$OUT/$file" 2>&1
  rc=$?
  set -e
  log "$name: exit $rc in $(($(date +%s) - start)) s (log $file)"
  return "$rc"
}

log "machine: $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi unavailable')"
log "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo missing); cmake: $(cmake --version | head -1)"
TORCH_PREFIX="$("$PYTHON" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
log "torch: $("$PYTHON" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())')"

# GoogleTest: the installed package, else built from a source tree into the build dir.
PREFIX="$TORCH_PREFIX"
have_gtest=0
for cfg in /usr/lib/*/cmake/GTest/GTestConfig.cmake /usr/lib/cmake/GTest/GTestConfig.cmake \
  /usr/local/lib/cmake/GTest/GTestConfig.cmake; do
  [[ -f "$cfg" ]] && have_gtest=1
done
if [[ "$have_gtest" == 0 ]]; then
  src="${GTEST_SRC:-}"
  for cand in /usr/src/googletest "$ROOT/.gpu_deps/googletest"; do
    [[ -z "$src" && -f "$cand/CMakeLists.txt" ]] && src="$cand"
  done
  if [[ -z "$src" ]]; then
    log "no GTest installed and no googletest sources (set GTEST_SRC or carry .gpu_deps/googletest)"
    exit 1
  fi
  step "googletest build" gtest.log bash -c "cmake -S '$src' -B '$BUILD/_gtest' -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX='$BUILD/_gtest/install' -DBUILD_GMOCK=OFF \
    && ninja -C '$BUILD/_gtest' -j $JOBS install"
  PREFIX="$PREFIX;$BUILD/_gtest/install"
fi

if ! ls /usr/lib/*/cmake/hwy/hwy-config.cmake >/dev/null 2>&1; then
  [[ -d "$ROOT/.gpu_deps/hwy/usr" ]] || { log "no Highway: carry .gpu_deps/hwy (--carry-hwy)"; exit 1; }
  PREFIX="$PREFIX;$ROOT/.gpu_deps/hwy/usr"
  export LD_LIBRARY_PATH="$ROOT/.gpu_deps/hwy/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

step configure configure.log cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DATTNSCOPE_WITH_HDF5=OFF -DATTNSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DPython3_EXECUTABLE="$(command -v "$PYTHON")"
grep -q "attnscope: CUDA kernels ON" "$OUT/configure.log" || { log "CUDA not enabled"; exit 1; }

# Only what the GPU checks need: the CUDA kernels, core, the bench and the CUDA tests.
step build build.log ninja -C "$BUILD" -j "$JOBS" attnscope_cuda_unit_tests attnscope_gpu_tests \
  attnscope-bench

status=0
step "cuda unit tests (cpu)" unit_tests.log "$BUILD/tests/gpu/attnscope_cuda_unit_tests" || status=1
step "ctest -L gpu" ctest_gpu.log ctest --test-dir "$BUILD" -L gpu --output-on-failure \
  --timeout 400 || status=1
grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$OUT/ctest_gpu.log" | tail -12 >>"$SUMMARY" || true
if grep -q "Skipped" "$OUT/ctest_gpu.log" && nvidia-smi -L >/dev/null 2>&1; then
  log "gpu tests were skipped on a machine with a GPU: the CUDA runtime saw no device"
  status=1
fi
step "bench (GPU part)" bench.log bash -c \
  "'$BUILD/bench/attnscope-bench' --json --gpu-only --reps 5 --warmup 1 >'$OUT/bench_gpu.json'" ||
  status=1
log "done: status $status"
exit "$status"
