"""Runs two commands and checks that they print the same JSON (ignoring "seconds") and exit alike.

usage: same_json.py CMD1... --- CMD2...
Used to pin that `scan --threads N` does not change the report or its order.
"""
import json
import subprocess
import sys


def run(command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    doc = json.loads(done.stdout)
    doc.pop("seconds", None)
    return done.returncode, doc


def main() -> int:
    split = sys.argv.index("---")
    first, second = run(sys.argv[1:split]), run(sys.argv[split + 1 :])
    if first != second:
        print("exit codes:", first[0], second[0])
        paths = [[c.get("path") for c in doc.get("cases", [])] for _, doc in (first, second)]
        print("same case order:", paths[0] == paths[1])
        print("FAILED: the two runs differ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
