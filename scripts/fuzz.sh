#!/usr/bin/env bash
# Bounded libFuzzer run over the dump reader (fuzz/dump_reader_fuzz.cpp): builds the fuzzer
# with clang-14 in its own build dir, seeds it with tests/data/bad/ and the sample dump's small
# cases, fuzzes for a fixed time (continuing past crashes, -fork=1), then re-runs every
# reproducer (fuzz/triage.py) and fails on any crash, sanitizer report, leak, OOM or hang
# (> 10 s) in attnscope's code. Faults inside libhdf5 itself are listed but contained by
# attnscope-probe. Reproducers land in BUILD/artifacts/; keep each new one as
# tests/data/bad/fuzz_<what>.h5.
#   ATTNSCOPE_FUZZ_SECONDS  fuzzing time (default 180)
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

rm -rf "$BUILD/seeds"
"$VENV/bin/python" "$ROOT/fuzz/make_seeds.py" "$ROOT/resources/samples/seed_cases.h5" \
  "$ROOT/tests/data/bad" "$BUILD/seeds"
rm -rf "$BUILD/artifacts"
mkdir -p "$BUILD/corpus" "$BUILD/artifacts"

log "fuzzing for $TIME s"
# detect_leaks: a leak in the reader's error paths is a bug too.
# libFuzzer exits non-zero when it found anything; triage below decides whose fault it is.
fuzz_status=0
ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
  LSAN_OPTIONS="suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0" \
  "$BUILD/dump_reader_fuzz" -max_total_time="$TIME" -timeout=10 -rss_limit_mb=2048 \
  -max_len=196608 -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
  -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/" \
  ${ATTNSCOPE_FUZZ_ARGS:-} "$BUILD/corpus" "$BUILD/seeds" || fuzz_status=$?
log "libFuzzer exited with $fuzz_status; triage of $BUILD/artifacts:"
LSAN_OPTIONS="suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0" \
  "$VENV/bin/python" "$ROOT/fuzz/triage.py" "$BUILD/dump_reader_fuzz" "$BUILD/artifacts"
