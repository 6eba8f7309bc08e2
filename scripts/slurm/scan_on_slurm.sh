#!/usr/bin/env bash
# Scans a dump or a run folder on a Slurm cluster: a job array of SHARDS tasks, each running
# `attnscope-cli scan RUN --json --shard I/SHARDS` into OUT/shard_I.json, then a merge job
# (--dependency=afterok on the array) writing OUT/report.json, which is exactly what
# `attnscope-cli scan RUN --json` prints; the merge job exits like it (1: error findings).
#   bash scripts/slurm/scan_on_slurm.sh RUN OUT SHARDS [extra sbatch args, e.g. -p short -t 30]
# Prints `scan_job=ID` and `merge_job=ID` and returns at once; logs go to OUT/logs. Wait with
# e.g. `srun --dependency=afterany:MERGE_ID true` or poll `squeue -j MERGE_ID`.
# Environment: ATTNSCOPE_CLI (else attnscope-cli on the nodes' PATH; exported to the jobs with
# the rest of the environment), ATTNSCOPE_SLURM_THROTTLE (array tasks running at once, default
# 50: --array=0-N%50). OUT and RUN must be on a filesystem the nodes see.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
job_script="$here/attnscope_scan.sbatch"

die() { echo "scan_on_slurm: $*" >&2; exit 2; }

(($# >= 3)) || die "usage: $0 RUN OUT SHARDS [extra sbatch args]"
run="$1" out="$2" shards="$3"
shift 3
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || die "SHARDS must be a positive integer, not '$shards'"
throttle="${ATTNSCOPE_SLURM_THROTTLE:-50}"
[[ "$throttle" =~ ^[1-9][0-9]*$ ]] || die "ATTNSCOPE_SLURM_THROTTLE must be a positive integer"
[[ -e "$run" ]] || die "$run does not exist"
command -v sbatch >/dev/null || die "sbatch not found (is Slurm installed and configured?)"

# Absolute paths: the jobs may start in another directory.
run="$(cd "$(dirname "$run")" && pwd)/$(basename "$run")"
mkdir -p "$out/logs"
out="$(cd "$out" && pwd)"
rm -f "$out"/shard_*.json "$out"/shard_*.json.part "$out/report.json"  # nothing stale to merge
if [[ -n "${ATTNSCOPE_CLI:-}" && "$ATTNSCOPE_CLI" != /* ]]; then
  ATTNSCOPE_CLI="$(cd "$(dirname "$ATTNSCOPE_CLI")" && pwd)/$(basename "$ATTNSCOPE_CLI")"
fi
[[ -n "${ATTNSCOPE_CLI:-}" ]] && export ATTNSCOPE_CLI

scan_job="$(sbatch --parsable --job-name=attnscope-scan --array="0-$((shards - 1))%$throttle" \
  --output="$out/logs/scan_%A_%a.log" "$@" "$job_script" "$run" "$out" "$shards")"
scan_job="${scan_job%%;*}"  # --parsable prints ID[;CLUSTER]
merge_job="$(sbatch --parsable --job-name=attnscope-merge --dependency="afterok:$scan_job" \
  --kill-on-invalid-dep=yes --output="$out/logs/merge_%j.log" "$@" \
  "$job_script" --merge "$out" "$shards")"
merge_job="${merge_job%%;*}"
echo "scan_job=$scan_job"
echo "merge_job=$merge_job"
echo "scan_on_slurm: $shards shards of $run; report: $out/report.json, logs: $out/logs" >&2
