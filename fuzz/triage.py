#!/usr/bin/env python3
"""Classifies the reproducers a fuzz run left in ARTIFACTS and fails on any that is attnscope's.

    triage.py FUZZER ARTIFACTS_DIR

Each crash- / leak- / timeout- / oom- file is re-run alone; the first stack frame of the report
that is not the sanitizer, libFuzzer or libc decides (frames inside the fuzzer binary without
a source line are the sanitizer's interceptors, e.g. "in strdup (dump_reader_fuzz+0x...)", and
libFuzzer's own code): inside libhdf5 (or libzip) it is a bug of that
library itself, which attnscope contains by opening untrusted files in attnscope-probe first
(core/io/dump_probe.h), so it is listed but does not fail; anything else fails. Keep every new
reproducer as tests/data/bad/fuzz_<what>.h5.
"""
import os
import re
import subprocess
import sys

# A frame is "#N 0xPC in FUNCTION WHERE", or "#N 0xPC  (MODULE+0xOFFSET)" without a symbol.
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ +(?:in )?(\S+)(.*)$")
NO_SOURCE_IN_FUZZER = re.compile(r"\(\S*_fuzz\+0x[0-9a-f]+\)")
RUNTIME = ("__interceptor_", "__asan", "__sanitizer", "__lsan", "__ubsan", "fuzzer::", "malloc",
           "calloc", "realloc", "operator new", "__libc_", "libc.so", "memcpy", "memmove",
           "memset", "strlen", "__GI_", "raise", "abort")


def owner(report):
    for line in report.splitlines():
        match = FRAME.match(line)
        if not match:
            continue
        text = match.group(1) + match.group(2)
        if any(r in text for r in RUNTIME) or NO_SOURCE_IN_FUZZER.search(text):
            continue
        if "libhdf5" in text:
            return "hdf5"
        return "libzip" if "libzip.so" in text else text.strip()
    return "unknown"


def rerun(fuzzer, path):
    """(run, owner) of the reproducer re-run alone. Leak reports need malloc's slow unwinder
    (fast_unwind_on_malloc=0) for whole stacks; but a hang that allocates in a loop then spends
    its time inside that unwinder, libFuzzer's alarm fires there and reports "<empty stack>",
    which names nobody. Such a report is re-run with the fast unwinder, which lets the real
    verdict (an out-of-memory or a timeout with frames) through."""
    for unwind in ("0", "1"):
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=" + unwind)
        run = subprocess.run([fuzzer, "-timeout=10", "-rss_limit_mb=2048", path],
                             capture_output=True, text=True, timeout=600, env=env)
        if run.returncode == 0:
            return run, "does not reproduce"
        if "<empty stack>" not in run.stderr:
            break
    return run, owner(run.stderr)


def main():
    fuzzer, artifacts = sys.argv[1:3]
    failed = 0
    names = sorted(n for n in os.listdir(artifacts)
                   if n.split("-")[0] in ("crash", "leak", "timeout", "oom") or "-crash-" in n
                   or "-timeout-" in n or "-leak-" in n or "-oom-" in n)
    for name in names:
        run, where = rerun(fuzzer, os.path.join(artifacts, name))
        kind = next((l.strip() for l in run.stderr.splitlines() if "ERROR:" in l), "")
        library = {"hdf5": "HDF5", "libzip": "libzip"}.get(where)
        verdict = library + " library bug, contained by attnscope-probe" if library else "FAIL"
        if where == "does not reproduce":
            verdict = "flaky (no report when re-run alone)"
        print("%s: %s: %s [%s]" % (name, verdict, kind[:160], where[:120]))
        failed += verdict == "FAIL"
    print("%d reproducers, %d attnscope failures" % (len(names), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
