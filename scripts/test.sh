#!/usr/bin/env bash
# README command 2: set up (idempotent), build, and run the whole test suite through ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/build_env.sh"
export ATTNSCOPE_BUILD="${ATTNSCOPE_BUILD:-$ROOT/build}"
bash "$ROOT/scripts/setup.sh"
cd "$ATTNSCOPE_BUILD"
attnscope_stage "tests (ctest, $ATTNSCOPE_BUILD)" ctest --output-on-failure -j "$(nproc)" "$@"
