#!/usr/bin/env bash
# Screenshot of the attnscope GUI on the bundled sample under a virtual X server: the case
# /fp16_score_overflow, head 3, fp16 unfused (QK^T overflows to +inf). Settings live in a
# throw-away config dir so the default layout is shown.
#   scripts/screenshot.sh [OUT.png]      (default: $ATTNSCOPE_BUILD/screenshots/fp16_score_overflow.png)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ATTNSCOPE_BUILD:-$ROOT/build}"
GUI="$BUILD/app/attnscope"
OUT="${1:-$BUILD/screenshots/fp16_score_overflow.png}"
if [[ ! -x "$GUI" ]]; then
  echo "screenshot: $GUI is not built (cmake --build $BUILD --target attnscope)" >&2
  exit 2
fi
command -v xvfb-run >/dev/null || { echo "screenshot: xvfb-run is not installed" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"
CONFIG="$(mktemp -d)"
trap 'rm -rf "$CONFIG"' EXIT
XDG_CONFIG_HOME="$CONFIG" xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$GUI" --precision fp16 --mode unfused --head 3 --screenshot "$OUT" \
  "$ROOT/resources/samples/seed_cases.h5::/fp16_score_overflow"
echo "screenshot: $OUT"
