#!/usr/bin/env python3
"""Regenerates the hostile corpus into a scratch folder and checks it equals the committed one.

    compare_corpus.py GENERATOR COMMITTED_DIR SCRATCH_DIR

Fuzzing reproducers (fuzz_*) are committed as found and are only checked to be listed in
expected.json.
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys


def main() -> int:
    generator, committed, scratch = sys.argv[1:4]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    for name in os.listdir(committed):
        if name.startswith("fuzz_") or name == "expected.json":
            shutil.copy(os.path.join(committed, name), scratch)
    subprocess.run([sys.executable, generator, scratch], check=True)
    failures = []
    names = sorted(set(os.listdir(committed)) | set(os.listdir(scratch)))
    for name in names:
        a, b = os.path.join(committed, name), os.path.join(scratch, name)
        if not os.path.exists(a) or not os.path.exists(b):
            failures.append(f"{name}: only in {'scratch' if os.path.exists(b) else 'committed'}")
        elif not filecmp.cmp(a, b, shallow=False):
            failures.append(f"{name}: differs from the generator's output")
    expected = json.load(open(os.path.join(committed, "expected.json")))
    hostile = [n for n in names if n != "expected.json"]
    failures += [f"{n}: not in expected.json" for n in hostile if n not in expected]
    if len(hostile) < 30:
        failures.append(f"only {len(hostile)} hostile files")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
