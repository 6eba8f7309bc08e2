"""Long-sequence scan time (issue 17, item 4): `attnscope-cli scan --json` of one case, one head,
float16, causal, q, k, v and dO [1, 1, S, D] (default S = 32768, D = 64; finite normal values).
Prints one JSON document: wall seconds per run (REPS runs), their median, the CLI's peak
resident memory (ru_maxrss), the target (30 s at S = 32768) and the scan's finding kinds, so a
faster scan that changes what it reports shows at once.

usage: python bench/long_scan_bench.py [--cli build/app/cli/attnscope-cli] [--seqlen 32768]
         [--head-dim 64] [--reps 1] [--threads N] [--dump FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import h5py
import numpy as np


def write_case(path, seqlen, head_dim):
    """/case: float16 q, k, v, do [1, 1, S, D], causal (top-left)."""
    rng = np.random.default_rng(17)
    with h5py.File(path, "w") as f:
        f.attrs.update(attnscope_schema=1, attnscope_schema_minor=1)
        g = f.create_group("case")
        g.attrs.update(dtype="float16", causal=True)
        for name in ("q", "k", "v", "do"):
            g.create_dataset(name, data=rng.standard_normal((1, 1, seqlen, head_dim))
                             .astype(np.float16))


def scan_once(cli, dump, threads):
    """(seconds, peak RSS MiB, report) of one `scan --json` process."""
    start = time.perf_counter()
    threads = ["--threads", str(threads)] if threads else []
    p = subprocess.Popen([cli, "scan", dump, "--json"] + threads,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"scan of {dump} exited {code}")
    return seconds, round(usage.ru_maxrss / 1024, 1), json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default="build/app/cli/attnscope-cli")
    ap.add_argument("--seqlen", type=int, default=32768)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--threads", type=int, help="kernel threads (default: every core)")
    ap.add_argument("--dump", help="keep the generated dump here (default: a temporary file)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dump = a.dump or os.path.join(tmp, "long.h5")
        write_case(dump, a.seqlen, a.head_dim)
        runs = [scan_once(a.cli, dump, a.threads) for _ in range(a.reps)]
    seconds = [round(s, 2) for s, _, _ in runs]
    report = runs[-1][2]
    kinds = sorted({f["kind"] for c in report["cases"] for f in c["findings"]})
    print(json.dumps({
        "case": {"seqlen": a.seqlen, "head_dim": a.head_dim, "dtype": "float16", "causal": True},
        "threads": a.threads or os.cpu_count(), "seconds": seconds,
        "median_seconds": statistics.median(seconds),
        "target_seconds": 30.0 if a.seqlen == 32768 else None,
        "peak_rss_mib": max(m for _, m, _ in runs), "finding_kinds": kinds}, indent=2))


if __name__ == "__main__":
    main()
