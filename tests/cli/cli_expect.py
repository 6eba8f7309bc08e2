"""Runs one attnscope-cli command and checks its exit code and output.

usage: cli_expect.py --exit N [--stdout TEXT]... [--stderr TEXT]... [--json-check EXPR] -- CMD...
--json-check evaluates EXPR with `doc` bound to the parsed JSON on stdout; it must be true.
"""
import argparse
import json
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit", type=int, required=True)
    parser.add_argument("--stdout", action="append", default=[])
    parser.add_argument("--stderr", action="append", default=[])
    parser.add_argument("--json-check", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    failures = []
    if run.returncode != args.exit:
        failures.append(f"exit code {run.returncode}, expected {args.exit}")
    for text in args.stdout:
        if text not in run.stdout:
            failures.append(f"stdout lacks {text!r}")
    for text in args.stderr:
        if text not in run.stderr:
            failures.append(f"stderr lacks {text!r}")
    if args.json_check:
        try:
            doc = json.loads(run.stdout)
        except json.JSONDecodeError as error:
            failures.append(f"stdout is not JSON: {error}")
        else:
            for expr in args.json_check:
                if not eval(expr, {"doc": doc}):
                    failures.append(f"JSON check failed: {expr}")
    if failures:
        print("command:", " ".join(command))
        print("stdout:\n" + run.stdout[-4000:])
        print("stderr:\n" + run.stderr[-4000:])
        print("\n".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
