#!/usr/bin/env python3
"""attnscope-cli on dumps with some cases whose data cannot be read (issue 7).

    broken_cases_cli.py --cli CLI --dumps DIR --work DIR TEST

DIR holds the files of tests/data/broken_case_dumps.py. Tests:
  info     info lists the good cases and the broken one with file, dataset, problem, hint; exit 1;
           --json carries "broken"
  scan     scan skips the broken case and reports it (stderr, summary, --json "broken"); the
           other cases are scanned; exit 2; --case naming the broken case: its error, exit 2
  run      run writes the readable cases, says what it skipped, exits 2
  hang     a case whose data read blocks (external raw storage on a FIFO) is killed after
           $ATTNSCOPE_PROBE_TIMEOUT and listed broken; the other case opens; a file whose only
           case hangs is refused with exit 2
  probe-timeout  --probe-timeout 2 wins over ATTNSCOPE_PROBE_TIMEOUT=600 on the same hanging
           dumps (info, scan, step: the message names 2 s and the option); bad values
           (0, -1, abc, nan, inf, 1e7, empty) are usage errors naming the option, exit 2
"""
import argparse
import json
import os
import subprocess
import sys

import h5py
import numpy as np

CRASH = "one_crashing_case.h5"
# How the probe's death is worded: a signal, or the exit status of the sanitizer that caught the
# fault first in the ASan + UBSan build of scripts/sanitize.sh (86 ASan, 87 UBSan: clang's
# UBSan sees the bad read before ASan does).
CRASH_HOW = ["crashed (signal 11, Segmentation fault)"] + [
    f"failed abnormally (probe exit status {code}, e.g. a memory error caught by a sanitizer)"
    for code in (86, 87)]


def crash_problem(text):
    """The expected problem text, in the wording that occurs in `text` (else the signal one)."""
    how = next((h for h in CRASH_HOW if h in text), CRASH_HOW[0])
    return (f"/step_2/q: the HDF5 library {how} while reading the dataset's data (in attnscope's "
            "probe process); attnscope does not load this case")
GOOD = ["/step_0", "/step_1", "/step_3"]


class Check:
    def __init__(self):
        self.failures = []

    def that(self, ok, what):
        if not ok:
            self.failures.append(what)


def cli(args, *argv, env=None, timeout=120):
    run = subprocess.run([args.cli, *argv], capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, **(env or {})))
    return run.returncode, run.stdout, run.stderr


def test_info(args, check):
    path = os.path.join(args.dumps, CRASH)
    code, out, err = cli(args, "info", path)
    check.that(code == 1, f"info exit {code}, expected 1\n{err}")
    for case in GOOD:
        check.that(f"\n{case} " in out, f"info lacks {case}:\n{out}")
    check.that(f"  /step_2 B=1 H=2 Sq=16 D=8: {path}: {crash_problem(out)} (hint: the file is corrupt"
               in out, f"info lacks the broken case:\n{out}")
    code, out, err = cli(args, "info", path, "--json")
    doc = json.loads(out)
    check.that([c["path"] for c in doc["cases"]] == GOOD, f"info --json cases: {doc['cases']}")
    check.that(len(doc["broken"]) == 1 and doc["broken"][0]["path"] == "/step_2" and
               doc["broken"][0]["message"] == f"{path}: {crash_problem(out)}" and
               "re-export" in doc["broken"][0]["hint"], f"info --json broken: {doc['broken']}")


def test_scan(args, check):
    path = os.path.join(args.dumps, CRASH)
    code, out, err = cli(args, "scan", path)
    check.that(code == 2, f"scan exit {code}, expected 2\n{err}")
    check.that(err.startswith(f"attnscope-cli scan: skipped /step_2, its data cannot be read: "
                              f"{path}: {crash_problem(err)}\n  hint: "), f"scan stderr:\n{err}")
    check.that("3 cases scanned" in out and "1 case skipped, unreadable: /step_2" in out,
               f"scan summary:\n{out}")
    code, out, err = cli(args, "scan", path, "--json")
    doc = json.loads(out)
    check.that(code == 2, f"scan --json exit {code}")
    check.that([c["path"] for c in doc["cases"]] == GOOD, f"scan --json cases: {doc['cases']}")
    check.that([b["path"] for b in doc["broken"]] == ["/step_2"], f"scan --json: {doc['broken']}")
    code, out, err = cli(args, "scan", path + "::/step_2")
    check.that(code == 2 and f"{path}: {crash_problem(err)}" in err and "hint:" in err,
               f"scan ::/step_2 exit {code}:\n{err}")
    unreadable = os.path.join(args.dumps, "one_unreadable_case.h5")
    code, out, err = cli(args, "scan", unreadable, "--case", "/step_[01]")
    check.that(code == 0 and "skipped" not in err, f"scan of good cases only: exit {code}\n{err}")


def test_run(args, check):
    path = os.path.join(args.dumps, "two_crashing_cases.h5")
    os.makedirs(args.work, exist_ok=True)
    out_path = os.path.join(args.work, "broken_run_results.h5")
    code, out, err = cli(args, "run", path, "--out", out_path)
    check.that(code == 2, f"run exit {code}, expected 2\n{err}")
    check.that(f"wrote 2 cases to {out_path}, skipped 2 unreadable" in out, f"run stdout:\n{out}")
    check.that(err.count("skipped /step_") == 2, f"run stderr:\n{err}")
    with h5py.File(out_path, "r") as f:
        check.that(sorted(f.keys()) == ["step_0", "step_3"], f"run wrote {sorted(f.keys())}")


def fifo_dump(path, cases):
    """Cases q, k, v [1, 2, 16, 8]; /b/q is stored externally in a FIFO nobody writes."""
    raw = path + ".raw"
    shape = (1, 2, 16, 8)
    with h5py.File(path, "w") as f:
        for c in cases:
            g = f.create_group(c)
            for name in "qkv":
                if c == "b" and name == "q":
                    g.create_dataset("q", shape=shape, dtype="f4",
                                     external=[(os.path.basename(raw), 0, 4 * 256)])
                else:
                    g.create_dataset(name, data=np.ones(shape, "f4"))
    if os.path.lexists(raw):
        os.remove(raw)
    os.mkfifo(raw)


def test_hang(args, check):
    os.makedirs(args.work, exist_ok=True)
    env = {"ATTNSCOPE_PROBE_TIMEOUT": "3"}
    mixed = os.path.join(args.work, "fifo_mixed.h5")
    fifo_dump(mixed, ["a", "b"])
    code, out, err = cli(args, "info", mixed, "--allow-external", env=env)
    check.that(code == 1, f"info exit {code}, expected 1\n{err}")
    check.that(f"  /b B=1 H=2 Sq=16 D=8: {mixed}: /b/q: the HDF5 library did not finish within "
               "3 s (hang) while reading the dataset's data" in out and
               "ATTNSCOPE_PROBE_TIMEOUT" in out, f"info stdout:\n{out}")
    check.that("\n/a " in out, f"info lacks /a:\n{out}")
    alone = os.path.join(args.work, "fifo_alone.h5")
    fifo_dump(alone, ["b"])
    code, out, err = cli(args, "scan", alone, "--allow-external", env=env)
    check.that(code == 2, f"scan exit {code}, expected 2\n{err}")
    check.that(f"{alone}: /b/q: the HDF5 library did not finish within 3 s (hang)" in err and
               "hint:" in err, f"scan stderr:\n{err}")


def test_probe_timeout(args, check):
    os.makedirs(args.work, exist_ok=True)
    env = {"ATTNSCOPE_PROBE_TIMEOUT": "600"}  # would outlast the test's timeout
    mixed = os.path.join(args.work, "fifo_mixed_option.h5")
    fifo_dump(mixed, ["a", "b"])
    code, out, err = cli(args, "info", mixed, "--allow-external", "--probe-timeout", "2", env=env)
    check.that(code == 1, f"info exit {code}, expected 1\n{err}")
    check.that(f"{mixed}: /b/q: the HDF5 library did not finish within 2 s (hang)" in out and
               "--probe-timeout SECONDS" in out, f"info stdout:\n{out}")
    alone = os.path.join(args.work, "fifo_alone_option.h5")
    fifo_dump(alone, ["b"])
    for command in (["scan", alone], ["step", alone + "::/b"]):
        code, out, err = cli(args, *command, "--allow-external", "--probe-timeout=2", env=env)
        check.that(code == 2, f"{command[0]} exit {code}, expected 2\n{err}")
        check.that(f"{alone}: /b/q: the HDF5 library did not finish within 2 s (hang)" in err and
                   "--probe-timeout SECONDS" in err, f"{command[0]} stderr:\n{err}")
    for bad in ("0", "-1", "abc", "nan", "inf", "1e7", ""):
        code, out, err = cli(args, "info", mixed, "--probe-timeout", bad)
        check.that(code == 2 and f"attnscope-cli info: bad --probe-timeout '{bad}'" in err and
                   "hint: a number of seconds > 0" in err and out == "",
                   f"--probe-timeout {bad!r}: exit {code}\n{err}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--dumps", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("test", choices=["info", "scan", "run", "hang", "probe-timeout"])
    args = parser.parse_args()
    check = Check()
    globals()["test_" + args.test.replace("-", "_")](args, check)
    for failure in check.failures:
        print(failure, file=sys.stderr)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
