"""Run-folder scan throughput: `attnscope-cli scan RUN --shard I/N` in N processes at once (what
scripts/scan_parallel.sh and the Slurm array run) against one process, on a run folder of
RANKS dumps x CASES_PER_RANK small cases ([1, 2, 16, 8] float16; every 100th holds a NaN).
Prints one JSON document: cases per second for 1 and N shards (one kernel thread each), their
ratio, each process's peak resident memory (ru_maxrss) and whether the merged shards are
byte-identical to the unsharded report.

usage: python bench/run_scan_bench.py [--cli build/app/cli/attnscope-cli] [--shards 2]
         [--ranks 4] [--cases-per-rank 500] [--folder DIR] [--memory-budget 1G]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import h5py
import numpy as np


def write_run(folder, ranks, per_rank):
    """rank_RRRRR.h5 with root attributes rank / world_size / host and /step_S/layer_L cases."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(11)
    for rank in range(ranks):
        with h5py.File(os.path.join(folder, f"rank_{rank:05d}.h5"), "w") as f:
            f.attrs.update(attnscope_schema=1, attnscope_schema_minor=1, rank=rank,
                           world_size=ranks, local_rank=rank, host="bench")
            for n in range(per_rank):
                g = f.create_group(f"/step_{n // 10:06d}/layer_{n % 10:02d}")
                g.attrs.update(step=n // 10, layer=n % 10, dtype="float16")
                for name in ("q", "k", "v", "do"):
                    x = rng.standard_normal((1, 2, 16, 8)).astype(np.float16)
                    if name == "v" and (rank * per_rank + n) % 100 == 0:
                        x[0, 1, 3, 5] = np.nan
                    g.create_dataset(name, data=x)


def run_processes(commands, outputs):
    """Runs the commands at once, stdout of each to its file; (seconds, [peak RSS MiB])."""
    start = time.perf_counter()
    procs = []
    for command, out in zip(commands, outputs):
        with open(out, "w") as f:
            procs.append(subprocess.Popen(command, stdout=f, stderr=subprocess.DEVNULL))
    peaks = []
    for p in procs:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(p.args)} exited {p.returncode}")
        peaks.append(round(usage.ru_maxrss / 1024, 1))
    return time.perf_counter() - start, peaks


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default="build/app/cli/attnscope-cli")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--cases-per-rank", type=int, default=500)
    ap.add_argument("--folder", help="the run folder (default: a new one in a temp folder)")
    ap.add_argument("--memory-budget", default="1G", help="each process's --memory-budget")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="attnscope_run_bench_")
    folder = a.folder or os.path.join(work, "run")
    if not os.path.isdir(folder):
        write_run(folder, a.ranks, a.cases_per_rank)
    cases = a.ranks * a.cases_per_rank
    scan = [a.cli, "scan", folder, "--json", "--threads", "1", "--memory-budget",
            a.memory_budget]
    whole = os.path.join(work, "whole.json")
    one_s, one_rss = run_processes([scan], [whole])
    parts = [os.path.join(work, f"shard_{i}.json") for i in range(a.shards)]
    many_s, many_rss = run_processes([scan + ["--shard", f"{i}/{a.shards}"]
                                      for i in range(a.shards)], parts)
    merged = subprocess.run([a.cli, "merge", *parts], capture_output=True, text=True)
    with open(whole) as f:
        identical = merged.stdout == f.read()
    print(json.dumps({
        "cases": cases, "dumps": a.ranks, "cpu_count": os.cpu_count(),
        "one_shard": {"seconds": round(one_s, 2), "cases_per_s": round(cases / one_s, 1),
                      "peak_rss_mib": one_rss},
        f"{a.shards}_shards": {"seconds": round(many_s, 2),
                               "cases_per_s": round(cases / many_s, 1),
                               "peak_rss_mib": many_rss},
        "speedup": round(one_s / many_s, 2),
        "memory_budget": a.memory_budget,
        "merge_identical": identical,
    }, indent=2))
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
