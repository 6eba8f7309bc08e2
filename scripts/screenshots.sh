#!/usr/bin/env bash
# Renders the README's screenshots into docs/screenshots/ (or OUT_DIR): the GUI under a virtual
# X server (Xvfb, a 1366x768 laptop screen) on the bundled sample, and one figure written by
# `attnscope-cli export`.
#   lead_nan_origin.png      the sample opened without a case: scan badges in the browser and
#                            the origin of its first NaN focused (/train/step_005/layer_00, S of
#                            head 0 in fp16 unfused, its first +inf cell pinned)
#   main_fp16_overflow.png   /fp16_score_overflow, head 3, fp16 unfused: the +inf band in S
#                            (overlay colours, findings list, row plots)
#   ds_nan_gradients.png     the dS tab of the same head: NaN gradients of the overflowing rows
#   stepper_backward_tile.png  /padding_mask_fp16, batch 1, stepper at step 12 (recompute P of
#                            q tile 1, kv tile 0: padded rows 70-95 turn NaN): the Stepper page
#                            with the tile's P, its intermediates and the accumulators
#   annotated_session.png    the window on a copy of the sample whose sidecar session holds
#                            annotations (box, arrow, text) next to the automatic markers
#   export_annotated.png     `attnscope-cli export` of that annotated S view (stamped figure)
# Settings live in a throw-away config dir, so the default layout is shown; the GUI runs on copies
# of the sample in a temp dir with session autosave off, so no sidecar of an earlier run leaks in.
#   scripts/screenshots.sh [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ATTNSCOPE_BUILD:-$ROOT/build}"
GUI="$BUILD/app/attnscope"
CLI="$BUILD/app/cli/attnscope-cli"
OUT="${1:-$ROOT/docs/screenshots}"
BUNDLED="$ROOT/resources/samples/seed_cases.h5"
for program in "$GUI" "$CLI"; do
  if [[ ! -x "$program" ]]; then
    echo "screenshots: $program is not built (cmake --build $BUILD)" >&2
    exit 2
  fi
done
command -v xvfb-run >/dev/null || { echo "screenshots: xvfb-run is not installed" >&2; exit 2; }
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export ATTNSCOPE_SESSION_AUTOSAVE=0
mkdir -p "$WORK/plain"
SAMPLE="$WORK/plain/seed_cases.h5"
cp "$BUNDLED" "$SAMPLE"

shoot() {  # shoot NAME ARGS... : one GUI run, saved as OUT/NAME.png
  local name="$1"
  shift
  XDG_CONFIG_HOME="$WORK/config-$name" xvfb-run -a -s "-screen 0 1366x768x24" \
    "$GUI" --screenshot "$OUT/$name.png" "$@"
}

shoot lead_nan_origin "$SAMPLE"
shoot main_fp16_overflow --precision fp16 --mode unfused --head 3 "$SAMPLE::/fp16_score_overflow"
shoot ds_nan_gradients --precision fp16 --mode unfused --head 3 --matrix dS \
  "$SAMPLE::/fp16_score_overflow"
shoot stepper_backward_tile --batch 1 --matrix P --stepper 12 \
  "$SAMPLE::/padding_mask_fp16"

# A copy of the sample with a sidecar session: what a user would have annotated.
cp "$BUNDLED" "$WORK/seed_cases.h5"
cat >"$WORK/seed_cases.h5.attnscope.json" <<'JSON'
{"format": "attnscope-session", "version": 1, "cases": {"/fp16_score_overflow": {
  "batch": 0, "head": 3, "view": "S", "annotations": [
  {"kind": "box", "view": "S", "batch": 0, "head": 3, "from": [-0.5, 11.5], "to": [63.5, 40.5],
   "text": "rows 12-40: q.k > 65504 overflows fp16"},
  {"kind": "arrow", "view": "S", "batch": 0, "head": 3, "from": [40, 55], "to": [20, 41],
   "text": "rows below are finite"},
  {"kind": "text", "view": "S", "batch": 0, "head": 3, "from": [32, 3], "to": [32, 3],
   "text": "scale q before the matmul, or use bf16"}]}}}
JSON
shoot annotated_session --precision fp16 --mode unfused "$WORK/seed_cases.h5::/fp16_score_overflow"
"$CLI" export "$WORK/seed_cases.h5::/fp16_score_overflow" --view S --precision fp16 \
  --mode unfused --head 3 --out "$OUT/export_annotated.png"
echo "screenshots: $OUT"
