#!/usr/bin/env bash
# A throw-away one-node Slurm cluster on this machine, for tests (Debian 12: slurm-wlm 22.05,
# munge 0.5; scripts/setup.sh installs both).
#   bash tests/slurm/local_slurm.sh start DIR   # munged + slurmctld + slurmd, all state under DIR
#   export SLURM_CONF=DIR/slurm.conf            # then sbatch / squeue / sinfo / scontrol use it
#   bash tests/slurm/local_slurm.sh stop DIR    # stops every daemon `start DIR` started
# start writes DIR/munge (key, socket, pid, log, seed), DIR/slurm.conf (controller and one node
# on localhost named `hostname -s`, CPUs from nproc, no cgroups, no accounting, free TCP ports)
# and DIR/{state,spool,log}, and returns once sinfo shows the node idle (else it prints the
# logs' tails, stops what it started and exits 1). The daemons run as the calling user (root in
# CI). start on a DIR that is already running stops it first; stop is safe to repeat and also
# ends the job steps (slurmstepd) that this cluster left running.
set -euo pipefail

START_TIMEOUT="${LOCAL_SLURM_START_TIMEOUT:-60}"  # seconds for the node to become idle

die() { echo "local_slurm: $*" >&2; exit 1; }

usage() { die "usage: $0 start|stop DIR"; }

# PIDs of the slurmstepd processes (job steps) of this cluster: those holding a socket file of
# DIR/spool (slurmstepd listens on SlurmdSpoolDir/NODE_JOB.STEP).
stepd_pids() {
  local spool="$1" inodes pid fd link
  [[ -d "$spool" && -r /proc/net/unix ]] || return 0
  inodes="$(awk -v d="$spool/" 'index($8, d) == 1 {print $7}' /proc/net/unix | sort -u)"
  [[ -n "$inodes" ]] || return 0
  for pid in $(pgrep -x slurmstepd || true); do
    for fd in /proc/"$pid"/fd/*; do
      link="$(readlink "$fd" 2>/dev/null || true)"
      if [[ "$link" == socket:\[*\] ]] && grep -qx "${link//[^0-9]/}" <<<"$inodes"; then
        echo "$pid"
        break
      fi
    done
  done
}

# Whether PID runs (a zombie waiting for its parent to reap it does not count).
alive() {
  local state
  state="$(sed 's/.*) //' /proc/"$1"/stat 2>/dev/null | cut -d' ' -f1)"
  [[ -n "$state" && "$state" != Z ]]
}

# Sends TERM to PID (if it is alive and is NAME), waits up to 10 s, then KILLs it.
stop_pid() {
  local pid="$1" name="$2" i
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  alive "$pid" || return 0
  [[ "$(cat /proc/"$pid"/comm 2>/dev/null)" == "$name"* ]] || return 0  # a reused PID
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  echo "local_slurm: $name ($pid) ignored SIGTERM, killing it" >&2
  kill_now "$pid"
}

# PID and every process below it, children first.
tree() {
  local child
  for child in $(ps -e -o pid= -o ppid= | awk -v p="$1" '$2 == p {print $1}'); do
    tree "$child"
  done
  echo "$1"
}

# SIGKILLs the PIDs given and waits (5 s at most) until they are gone.
kill_now() {
  local pid i
  kill -KILL "$@" 2>/dev/null || true
  for pid in "$@"; do
    for ((i = 0; i < 50; i++)); do
      alive "$pid" || continue 2
      sleep 0.1
    done
    echo "local_slurm: process $pid is still alive" >&2
    return 1
  done
}

stop_cluster() {
  local dir="$1" ok=0 pid
  [[ -d "$dir" ]] || return 0
  # Jobs first, while slurmctld runs (best effort), so slurmd reaps their steps.
  pid="$(cat "$dir/slurmctld.pid" 2>/dev/null || true)"
  if [[ -f "$dir/slurm.conf" && "$pid" =~ ^[0-9]+$ ]] && alive "$pid"; then
    SLURM_CONF="$dir/slurm.conf" timeout 10 scancel --full --quiet --user="$(id -un)" \
      >/dev/null 2>&1 || true
  fi
  stop_pid "$(cat "$dir/slurmd.pid" 2>/dev/null || true)" slurmd || ok=1
  stop_pid "$(cat "$dir/slurmctld.pid" 2>/dev/null || true)" slurmctld || ok=1
  # slurmstepd ignores SIGTERM, and killing it alone would orphan the job's processes.
  for pid in $(stepd_pids "$dir/spool"); do
    kill_now $(tree "$pid") || ok=1
  done
  stop_pid "$(cat "$dir/munge/munged.pid" 2>/dev/null || true)" munged || ok=1
  rm -f "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid" \
    "$dir/munge/munge.socket" "$dir/munge/munge.socket.lock"
  return "$ok"
}

# Two TCP ports that are free now (the controller's and the node's).
free_ports() {
  python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

tail_logs() {
  local dir="$1" f
  for f in "$dir/munge/munged.log" "$dir/log/slurmctld.log" "$dir/log/slurmd.log"; do
    [[ -f "$f" ]] || continue
    echo "----- tail $f" >&2
    tail -n 25 "$f" >&2
  done
}

start_cluster() {
  local dir="$1" tool user node cpus mem_mb real_mb ports ctld_port node_port i state
  for tool in munged slurmctld slurmd sinfo scancel python3; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install slurm-wlm munge)"
  done
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  stop_cluster "$dir" || die "could not stop the cluster already running in $dir"
  # Fresh state every time: no jobs or node states carried over from an earlier run.
  rm -rf "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
  # munged refuses directories that others can write to, and a key others can read.
  chmod 0755 "$dir"
  mkdir -m 0755 "$dir/munge"  # the socket's directory: munged wants it searchable by all
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"

  user="$(id -un)"
  node="$(hostname -s)"
  cpus="$(nproc)"
  mem_mb="$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)"
  real_mb=$((mem_mb / 2 < 1024 ? mem_mb / 2 : 1024))
  ((real_mb >= 1)) || real_mb=1
  ports="$(free_ports)"
  ctld_port="${ports% *}"
  node_port="${ports#* }"

  mungekey --create --keyfile="$dir/munge/munge.key" --force 2>/dev/null ||
    { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 0600 "$dir/munge/munge.key"
  munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" ||
    { tail_logs "$dir"; die "munged did not start"; }

  cat >"$dir/slurm.conf" <<EOF
# Written by tests/slurm/local_slurm.sh: a one-node test cluster, everything under $dir.
ClusterName=attnscope-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$node_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# Jobs start when submitted (batch_sched_delay: 3 s by default) and the main loop, which also
# starts the merge job once its dependency is met, runs every 2 s (default 60 s).
SchedulerParameters=batch_sched_delay=0,sched_interval=2
MaxArraySize=100000
MaxJobCount=200000
MinJobAge=600
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
PlugStackConfig=$dir/plugstack.conf
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$real_mb State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$dir/plugstack.conf"  # no SPANK plugins (not the system's /etc/slurm/plugstack.conf)

  slurmctld -f "$dir/slurm.conf" -i || { tail_logs "$dir"; stop_cluster "$dir" || true
    die "slurmctld did not start"; }
  slurmd -f "$dir/slurm.conf" || { tail_logs "$dir"; stop_cluster "$dir" || true
    die "slurmd did not start"; }

  for ((i = 0; i < START_TIMEOUT * 2; i++)); do
    state="$(SLURM_CONF="$dir/slurm.conf" timeout 10 sinfo -h -n "$node" -o %T 2>/dev/null ||
      true)"
    if [[ "$state" == idle ]]; then
      echo "local_slurm: node $node idle (controller 127.0.0.1:$ctld_port);" \
        "export SLURM_CONF=$dir/slurm.conf" >&2
      return 0
    fi
    sleep 0.5
  done
  echo "local_slurm: node $node not idle after ${START_TIMEOUT}s (sinfo state: '${state:-none}')" >&2
  tail_logs "$dir"
  stop_cluster "$dir" || true
  exit 1
}

(($# == 2)) || usage
case "$1" in
  start) start_cluster "$2" ;;
  stop)
    [[ -d "$2" ]] || exit 0
    stop_cluster "$(cd "$2" && pwd)" || die "some daemon of $2 could not be stopped"
    ;;
  *) usage ;;
esac
