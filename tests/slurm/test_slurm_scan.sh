#!/usr/bin/env bash
# The sharded scan launchers give exactly the report of one `attnscope-cli scan RUN --json`:
#   1. scripts/scan_parallel.sh RUN OUT 2 (xargs -P, no Slurm): same exit status, report
#      identical byte for byte;
#   2. on a local one-node Slurm (tests/slurm/local_slurm.sh, in a temp dir, stopped on any
#      exit) scripts/slurm/scan_on_slurm.sh RUN OUT 3: the array tasks ran as 3 separate
#      Slurm jobs, the merge job exits like scan and its OUT/report.json is identical.
#   bash tests/slurm/test_slurm_scan.sh RUN_OR_FILE
# attnscope-cli: $ATTNSCOPE_CLI (CTest sets it), else build/app/cli/attnscope-cli. Exit 77
# (skipped) only when not root and Slurm/munge are not installed; as root (CI) missing
# packages fail the test. ATTNSCOPE_SLURM_TEST_TIMEOUT: seconds to wait for the jobs (300).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TIMEOUT="${ATTNSCOPE_SLURM_TEST_TIMEOUT:-300}"

(($# == 1)) || { echo "usage: $0 RUN_OR_FILE" >&2; exit 2; }
run="$1"
cli="${ATTNSCOPE_CLI:-$ROOT/build/app/cli/attnscope-cli}"
export ATTNSCOPE_CLI="$cli"

tmp=""
slurm_dir=""
cleanup() {
  local rc=$?
  if [[ -n "$slurm_dir" ]]; then
    bash "$ROOT/tests/slurm/local_slurm.sh" stop "$slurm_dir" || rc=1
  fi
  [[ -z "$tmp" ]] || rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { echo "[test_slurm_scan] $*" >&2; }

# Prints what helps to see why a Slurm step failed, then fails.
fail() {
  log "FAIL: $*"
  if [[ -n "$slurm_dir" && -f "$slurm_dir/slurm.conf" ]]; then
    echo "----- squeue" >&2
    squeue >&2 || true
    echo "----- scontrol show job" >&2
    scontrol show job >&2 || true
    local f
    for f in "$slurm_dir/log/slurmctld.log" "$slurm_dir/log/slurmd.log" "$tmp"/slurm_out/logs/*; do
      [[ -f "$f" ]] || continue
      echo "----- tail $f" >&2
      tail -n 20 "$f" >&2
    done
  fi
  exit 1
}

have_slurm=1
for tool in munged mungekey slurmctld slurmd sbatch squeue scontrol; do
  command -v "$tool" >/dev/null || { have_slurm=0; missing="$tool"; }
done
if ((!have_slurm)); then
  if (($(id -u) != 0)); then
    log "SKIP: $missing not found and not root (apt-get install slurm-wlm munge)"
    exit 77
  fi
  fail "$missing not found: install slurm-wlm and munge (scripts/setup.sh does)"
fi

[[ -x "$cli" ]] || fail "attnscope-cli not found at $cli (set ATTNSCOPE_CLI)"
[[ -e "$run" ]] || fail "$run does not exist"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/attnscope_slurm_test.XXXXXX")"
chmod 0755 "$tmp"  # munged wants its socket's directories searchable by all

SECONDS=0
rc_direct=0
"$cli" scan "$run" --json >"$tmp/direct.json" || rc_direct=$?
((rc_direct == 0 || rc_direct == 1)) || fail "attnscope-cli scan $run --json exited $rc_direct"
log "direct scan: exit $rc_direct, $(wc -c <"$tmp/direct.json") bytes (${SECONDS}s)"

# 1. One machine, xargs -P.
SECONDS=0
rc=0
bash "$ROOT/scripts/scan_parallel.sh" "$run" "$tmp/parallel_out" 2 || rc=$?
((rc == rc_direct)) || fail "scan_parallel.sh exited $rc, scan $rc_direct"
cmp "$tmp/parallel_out/report.json" "$tmp/direct.json" ||
  fail "scan_parallel.sh's report.json differs from the direct scan's"
log "scan_parallel.sh, 2 shards: exit $rc, report identical (${SECONDS}s)"

# 2. Slurm.
SECONDS=0
slurm_dir="$tmp/slurm"
bash "$ROOT/tests/slurm/local_slurm.sh" start "$slurm_dir" || fail "the local Slurm did not start"
export SLURM_CONF="$slurm_dir/slurm.conf"
log "local Slurm up (${SECONDS}s)"

SECONDS=0
out="$tmp/slurm_out"
ids="$(bash "$ROOT/scripts/slurm/scan_on_slurm.sh" "$run" "$out" 3)" ||
  fail "scan_on_slurm.sh failed"
scan_job="$(sed -n 's/^scan_job=//p' <<<"$ids")"
merge_job="$(sed -n 's/^merge_job=//p' <<<"$ids")"
[[ "$scan_job" =~ ^[0-9]+$ && "$merge_job" =~ ^[0-9]+$ ]] ||
  fail "scan_on_slurm.sh printed no job ids: $ids"

# JobState of a job that is not an array.
job_field() {
  scontrol --oneliner show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

state=""
while :; do
  state="$(job_field "$merge_job" JobState)" || fail "scontrol show job $merge_job failed"
  case "$state" in
    PENDING | CONFIGURING | RUNNING | COMPLETING | SUSPENDED | REQUEUED | RESIZING | "") ;;
    *) break ;;
  esac
  ((SECONDS < TIMEOUT)) || fail "merge job $merge_job still $state after ${TIMEOUT}s"
  sleep 1
done
exit_code="$(job_field "$merge_job" ExitCode)"
log "Slurm: array job $scan_job and merge job $merge_job done (${SECONDS}s): merge $state," \
  "ExitCode=$exit_code"
[[ "$exit_code" == "$rc_direct:0" ]] ||
  fail "merge job $merge_job: ExitCode=$exit_code, expected $rc_direct:0 (the direct scan's)"

# The array tasks: 3 separate jobs (distinct JobIds, ArrayTaskId 0..2), each completed, each
# with its own log naming that job id, each leaving its shard file.
tasks="$(scontrol --oneliner show job "$scan_job")" || fail "scontrol show job $scan_job failed"
n=0
declare -A seen_ids=()
while read -r line; do
  [[ -n "$line" ]] || continue
  fields="$(tr ' ' '\n' <<<"$line")"
  id="$(sed -n 's/^JobId=//p' <<<"$fields")"
  array="$(sed -n 's/^ArrayJobId=//p' <<<"$fields")"
  task="$(sed -n 's/^ArrayTaskId=//p' <<<"$fields")"
  tstate="$(sed -n 's/^JobState=//p' <<<"$fields")"
  [[ "$array" == "$scan_job" && "$task" =~ ^[0-2]$ ]] || fail "unexpected array record: $line"
  [[ "$tstate" == COMPLETED ]] || fail "array task $task (job $id) is $tstate"
  [[ -z "${seen_ids[$id]:-}" ]] || fail "job id $id twice in the array"
  seen_ids[$id]=1
  grep -q "job $id (array ${scan_job}_$task)" "$out/logs/scan_${scan_job}_$task.log" ||
    fail "log of array task $task does not name its job $id"
  [[ -s "$out/shard_$task.json" ]] || fail "array task $task wrote no $out/shard_$task.json"
  n=$((n + 1))
done <<<"$tasks"
((n == 3)) || fail "the array job $scan_job has $n tasks, expected 3"
log "array tasks: 3 Slurm jobs (${!seen_ids[*]}), each COMPLETED with its shard file"

cmp "$out/report.json" "$tmp/direct.json" ||
  fail "the Slurm merge job's report.json differs from the direct scan's"
log "PASS: Slurm report.json and scan_parallel.sh report.json identical to the direct scan's"
