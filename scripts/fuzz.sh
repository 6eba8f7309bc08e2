#!/usr/bin/env bash
# Bounded libFuzzer runs over the dump readers (fuzz/*_fuzz.cpp): builds the fuzzers with
# clang-14 in their own build dir, seeds each with its part of tests/data/bad/ plus small valid
# files (fuzz/make_seeds.py: the sample dump's small cases; .pt / .npz / .safetensors written
# by torch, numpy and safetensors; run-folder recipes and sidecar files), fuzzes for a fixed
# total CPU time split across the targets (three eighths for the HDF5 reader, an eighth for
# each of zip_dump_fuzz, pickle_fuzz, safetensors_fuzz, run_folder_fuzz and session_fuzz) and
# run by one libFuzzer worker per core (-fork=nproc, continuing past
# crashes), so the wall time is the CPU time over the cores; then re-runs every reproducer
# (fuzz/triage.py) and fails on any crash, sanitizer report, leak, OOM or hang (> 10 s) in
# attnscope's code. Faults inside libhdf5 or libzip themselves are listed but contained by
# attnscope-probe. Reproducers land in BUILD/artifacts/TARGET/; keep each new one in
# tests/data/bad/ as fuzz_<what>.<format suffix>.
#   ATTNSCOPE_FUZZ_SECONDS  total fuzzing CPU time, all workers together (default 180)
#   ATTNSCOPE_FUZZ_BUILD    build dir (default ./build-fuzz); its corpus/ persists between runs
#   ATTNSCOPE_FUZZ_ARGS     extra libFuzzer flags (e.g. "-seed=1 -jobs=2")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ATTNSCOPE_FUZZ_BUILD:-$ROOT/build-fuzz}"
TIME="${ATTNSCOPE_FUZZ_SECONDS:-180}"
VENV="${ATTNSCOPE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/attnscope/venv}"
log() { echo "[attnscope fuzz] $*" >&2; }
source "$ROOT/scripts/build_env.sh"

if [[ ! -f "$BUILD/build.ninja" ]]; then
  CC=clang-14 CXX=clang++-14 cmake -S "$ROOT/fuzz" -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo $(attnscope_launcher_args) >/dev/null
fi
attnscope_stage "fuzz: build $BUILD" cmake --build "$BUILD" -j "$(nproc)"

rm -rf "$BUILD/seeds" "$BUILD/artifacts"
"$VENV/bin/python" "$ROOT/fuzz/make_seeds.py" "$ROOT/resources/samples/seed_cases.h5" \
  "$ROOT/tests/data/bad" "$BUILD/seeds"

# CPU seconds per target: three eighths of the total for the HDF5 reader, an eighth for each
# other one; the wall time of each is that over the workers.
declare -A share=([dump_reader_fuzz]=3 [zip_dump_fuzz]=1 [pickle_fuzz]=1 [safetensors_fuzz]=1
  [run_folder_fuzz]=1 [session_fuzz]=1)
workers="$(nproc)"
status=0
for target in dump_reader_fuzz zip_dump_fuzz pickle_fuzz safetensors_fuzz run_folder_fuzz \
  session_fuzz; do
  seconds=$((TIME * share[$target] / 8 / workers))
  ((seconds > 0)) || seconds=1
  mkdir -p "$BUILD/corpus/$target" "$BUILD/artifacts/$target"
  log "$target: fuzzing for $seconds s with $workers workers"
  # detect_leaks: a leak in the readers' error paths is a bug too.
  # libFuzzer exits non-zero when it found anything; triage below decides whose fault it is.
  fuzz_status=0
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
    LSAN_OPTIONS="suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0" \
    "$BUILD/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=196608 -fork="$workers" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$target/" \
    ${ATTNSCOPE_FUZZ_ARGS:-} "$BUILD/corpus/$target" "$BUILD/seeds/$target" || fuzz_status=$?
  log "$target: libFuzzer exited with $fuzz_status; triage of $BUILD/artifacts/$target:"
  LSAN_OPTIONS="suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0" \
    "$VENV/bin/python" "$ROOT/fuzz/triage.py" "$BUILD/$target" "$BUILD/artifacts/$target" ||
    status=1
done
exit $status
