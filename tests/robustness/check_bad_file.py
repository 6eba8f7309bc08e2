#!/usr/bin/env python3
"""Checks that attnscope-cli refuses one hostile dump of tests/data/bad/ cleanly.

    check_bad_file.py --cli CLI FILE

For `info FILE` and `scan FILE`: exit code 2 (not a crash signal, not a hang: each command gets
--seconds, default 120), and stderr names the file, the object and the problem recorded for
FILE in expected.json (next to FILE), and carries a hint. An entry's "args" go after the command
(a file that hangs libhdf5 gets a short --probe-timeout).
"""
import argparse
import json
import os
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("file")
    args = parser.parse_args()
    name = os.path.basename(args.file)
    with open(os.path.join(os.path.dirname(args.file), "expected.json")) as f:
        expected = json.load(f)[name]
    failures = []
    for command in ("info", "scan"):
        try:
            run = subprocess.run([args.cli, command, *expected.get("args", []), args.file],
                                 capture_output=True, text=True,
                                 timeout=args.seconds)
        except subprocess.TimeoutExpired:
            failures.append(f"{command}: no answer within {args.seconds} s (hang)")
            continue
        if run.returncode != 2:
            failures.append(f"{command}: exit code {run.returncode}, expected 2")
        wanted = [name, expected["object"], expected["problem"], "hint:"]
        for text in filter(None, wanted):
            if text not in run.stderr:
                failures.append(f"{command}: stderr lacks {text!r}")
        if failures:
            failures.append(f"{command} stderr was:\n{run.stderr}")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
