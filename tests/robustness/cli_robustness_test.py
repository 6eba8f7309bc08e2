#!/usr/bin/env python3
"""attnscope-cli end-to-end robustness checks (issue 7), one per invocation:

    cli_robustness_test.py --cli CLI --sample SAMPLE --work DIR TEST

TEST is one of
  kill_during_run   SIGKILL `run --out` while its temporary exists: the previous results file
                    keeps its bytes and mtime, nothing that looks like output is left, and the
                    next run removes the dead writer's hidden temporary.
  dump_untouched    info, a full scan and a run leave the input dump's bytes and mtime unchanged.
  memory_budget     a dump whose full score matrix (1.1 GiB) exceeds the budget is scanned
                    streamed (the process never holds it), and a budget below the tensors
                    refuses with the size and the budget (--memory-budget and the environment).
"""
import argparse
import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)


def fingerprint(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), os.stat(path).st_mtime_ns


def run(cli, *args, env=None):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=900, env=env)


def write_case(path, group, shape, seed):
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        g = f.create_group(group)
        for name in ("q", "k", "v"):
            g[name] = rng.standard_normal(shape).astype(np.float32)


def kill_during_run(cli, sample, work):
    results = os.path.join(work, "results.h5")
    first = run(cli, "run", sample + "::/train/step_000/layer_00", "--out", results)
    check(first.returncode in (0, 1) and os.path.exists(results), "first run: " + first.stderr)
    before = fingerprint(results)
    big = os.path.join(work, "big.h5")
    write_case(big, "big", (1, 4, 2048, 32), 1)
    child = subprocess.Popen([cli, "run", big, "--out", results], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    temp_prefix = ".results.h5.%d-" % child.pid  # AtomicFile of DumpWriter(results.h5)
    seen = None
    while child.poll() is None and seen is None:
        seen = next((n for n in os.listdir(work) if n.startswith(temp_prefix)), None)
        time.sleep(0.005)
    if seen is None:
        check(False, "run --out finished before its temporary was seen")
        return
    child.send_signal(signal.SIGKILL)
    child.wait()
    check(child.returncode == -signal.SIGKILL, "child not killed: %s" % child.returncode)
    check(fingerprint(results) == before, "previous results.h5 changed")
    visible = sorted(n for n in os.listdir(work) if not n.startswith("."))
    check(visible == ["big.h5", "results.h5"], "files left that look like output: %s" % visible)
    hidden = [n for n in os.listdir(work) if n.startswith(".")]
    check(all(n.endswith(".tmp") for n in hidden), "hidden leftovers %s" % hidden)
    again = run(cli, "run", sample + "::/train/step_000/layer_00", "--out", results)
    check(again.returncode in (0, 1), "second run: " + again.stderr)
    check(not any(n.startswith(temp_prefix) for n in os.listdir(work)),
          "the dead writer's temporary was not removed")
    with h5py.File(results, "r") as f:
        check(list(f) == ["train"], "second run output: %s" % list(f))


def dump_untouched(cli, sample, work):
    dump = os.path.join(work, "dump.h5")
    shutil.copy2(sample, dump)
    os.chmod(dump, 0o444)
    before = fingerprint(dump)
    for args in (["info", dump], ["scan", dump, "--mode", "fused"],
                 ["run", dump + "::/recorded_mismatch", "--out", os.path.join(work, "out.h5")]):
        done = run(cli, *args)
        check(done.returncode in (0, 1), "%s: exit %d %s" % (args[0], done.returncode, done.stderr))
    check(fingerprint(dump) == before, "the dump's bytes or mtime changed")


def memory_budget(cli, sample, work):
    dump = os.path.join(work, "long_context.h5")
    write_case(dump, "long_context", (1, 1, 8192, 8), 2)
    full_scores = 8192 * 8192 * 17  # S, P, dP, dS in fp32 + mask byte: 1.1 GiB
    streamed = run(cli, "scan", dump, "--mode", "fused", "--memory-budget", "64M")
    check(streamed.returncode in (0, 1), "streamed scan: %s" % streamed.stderr)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    check(peak < full_scores // 2, "peak RSS %d bytes; the full scores take %d" % (peak, full_scores))
    tensors = "loading its tensors needs 1 MiB (1048576 bytes), more than the memory budget of "
    refused = run(cli, "scan", dump, "--memory-budget", "100K")
    check(refused.returncode == 2, "small budget: exit %d" % refused.returncode)
    for text in ("long_context.h5", "/long_context", tensors + "100 KiB (from --memory-budget)",
                 "hint:", "--memory-budget"):
        check(text in refused.stderr, "stderr lacks %r: %s" % (text, refused.stderr))
    env = dict(os.environ, ATTNSCOPE_MEMORY_BUDGET="64K")
    from_env = run(cli, "info", dump, env=env)
    check(from_env.returncode == 0, "info reads metadata only: %s" % from_env.stderr)
    from_env = run(cli, "scan", dump, env=env)
    check(from_env.returncode == 2 and tensors + "64 KiB (from ATTNSCOPE_MEMORY_BUDGET)"
          in from_env.stderr, "environment budget: %s" % from_env.stderr)
    bad = run(cli, "scan", dump, "--memory-budget", "lots")
    check(bad.returncode == 2 and "'lots' is not a memory size" in bad.stderr,
          "bad budget: %s" % bad.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--sample", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("test", choices=["kill_during_run", "dump_untouched", "memory_budget"])
    args = parser.parse_args()
    work = os.path.join(args.work, args.test)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    globals()[args.test](args.cli, args.sample, work)
    for failure in FAILURES:
        print("FAIL:", failure, file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
