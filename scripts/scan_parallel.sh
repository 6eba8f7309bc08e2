#!/usr/bin/env bash
# Scans a dump or a run folder on one big machine, without Slurm: SHARDS processes of
# `attnscope-cli scan RUN --json --shard I/SHARDS` (at most $ATTNSCOPE_JOBS at once, default
# nproc, via xargs -P) into OUT/shard_I.json, then `attnscope-cli merge` into OUT/report.json,
# which is exactly what `attnscope-cli scan RUN --json` prints.
#   bash scripts/scan_parallel.sh RUN OUT SHARDS
# Exits like scan: 0 no error findings, 1 error findings, 2 unreadable input or a failed shard,
# 130 interrupted. attnscope-cli: $ATTNSCOPE_CLI, else PATH. Each shard gets
# nproc / ATTNSCOPE_JOBS threads (at least 1).
set -euo pipefail

die() { echo "scan_parallel: $*" >&2; exit 2; }

(($# == 3)) || die "usage: $0 RUN OUT SHARDS"
run="$1" out="$2" shards="$3"
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || die "SHARDS must be a positive integer, not '$shards'"
jobs="${ATTNSCOPE_JOBS:-$(nproc)}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "ATTNSCOPE_JOBS must be a positive integer"
((jobs <= shards)) || jobs="$shards"
threads=$(($(nproc) / jobs))
((threads >= 1)) || threads=1
cli="${ATTNSCOPE_CLI:-$(command -v attnscope-cli || true)}"
[[ -n "$cli" && -x "$cli" ]] || die "attnscope-cli not found (set ATTNSCOPE_CLI or PATH)"
export HDF5_USE_FILE_LOCKING="${HDF5_USE_FILE_LOCKING:-FALSE}"  # harmless locally, needed on NFS

mkdir -p "$out"
rm -f "$out"/shard_*.json "$out"/shard_*.json.part "$out/report.json"  # nothing stale to merge

# One shard: status 0 when scan exits 0 or 1 (findings are a result), else 2 (xargs then
# finishes the other shards and exits 123; its abort on 255 would not wait for them).
scan_shard() {
  local i="$1" rc=0
  "$cli" scan "$run" --json --shard "$i/$shards" --threads "$threads" \
    >"$out/shard_$i.json.part" || rc=$?
  if ((rc == 0 || rc == 1)); then
    mv -f "$out/shard_$i.json.part" "$out/shard_$i.json"
    return 0
  fi
  rm -f "$out/shard_$i.json.part"
  echo "scan_parallel: shard $i/$shards failed with exit status $rc" >&2
  return 2
}
export -f scan_shard
export cli run out shards threads

# Ctrl-C reaches every shard (same process group); each prints its prefix and exits 130.
trap 'rm -f "$out"/shard_*.json.part "$out/report.json.part"; exit 130' INT TERM

rc=0
seq 0 $((shards - 1)) | xargs -P "$jobs" -n 1 bash -c 'scan_shard "$1"' scan_shard || rc=$?
((rc == 0)) || die "some shard failed (xargs exit status $rc)"

parts=()
for ((i = 0; i < shards; i++)); do
  parts+=("$out/shard_$i.json")
done
rc=0
"$cli" merge "${parts[@]}" >"$out/report.json.part" || rc=$?
if ((rc == 0 || rc == 1)); then
  mv -f "$out/report.json.part" "$out/report.json"
else
  rm -f "$out/report.json.part"
fi
exit "$rc"
