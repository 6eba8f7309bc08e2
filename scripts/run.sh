#!/usr/bin/env bash
# README command 1: set up (idempotent), build, and open the bundled sample dump. Without a
# display (and until the GUI lands) it runs the headless equivalent: the CLI on the sample.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ATTNSCOPE_BUILD="${ATTNSCOPE_BUILD:-$ROOT/build}"
SAMPLE="$ROOT/resources/samples/seed_cases.h5"
bash "$ROOT/scripts/setup.sh"
GUI="$ATTNSCOPE_BUILD/app/attnscope"
if [[ -x "$GUI" && -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
  exec "$GUI" "$SAMPLE" "$@"
fi
if [[ -x "$GUI" ]]; then
  echo "attnscope: no display (DISPLAY/WAYLAND_DISPLAY unset); running the headless CLI instead." >&2
else
  echo "attnscope: the GUI is not built yet; running the headless CLI on the sample." >&2
fi
exec "$ATTNSCOPE_BUILD/app/cli/attnscope-cli" info "$SAMPLE" "$@"
