#!/usr/bin/env python3
"""Pins fuzz/triage.py's verdict on whose code a sanitizer report blames.

    fuzz_triage_test.py TRIAGE_DIR

The first frame outside the sanitizer runtime, libFuzzer and libc decides. ASan interceptors
are symbolized inside the fuzzer binary without a source line ("in strdup (dump_reader_fuzz+0x..)"),
so they must be skipped too (CI once failed on an HDF5 strdup overflow blamed on "strdup").
"""
import os
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, sys.argv.pop(1))
import triage  # noqa: E402

FUZZER = "/ci/work/main/build-fuzz/dump_reader_fuzz"


def frame(number, function, where):
    return "    #%d 0x55f9d14bdec0 in %s %s" % (number, function, where)


class Owner(unittest.TestCase):
    def test_interceptor_then_hdf5_is_hdf5(self):
        report = "\n".join([
            "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x60b000005e28",
            frame(0, "strdup", "(%s+0x147c95) (BuildId: 5b5c)" % FUZZER),
            frame(1, "H5MM_xstrdup", "(/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x1b2c0)"),
            frame(2, "attnscope::h5::discover(long)", "/ci/work/main/core/io/hdf5_discovery.cpp:80"),
        ])
        self.assertEqual(triage.owner(report), "hdf5")

    def test_interceptor_then_attnscope_is_attnscope(self):
        report = "\n".join([
            frame(0, "__interceptor_memcpy", "(%s+0x1000)" % FUZZER),
            frame(1, "strdup", "(%s+0x147c95)" % FUZZER),
            frame(2, "attnscope::h5::external_target(long)",
                  "/ci/work/main/core/io/hdf5_discovery.cpp:26"),
        ])
        self.assertEqual(triage.owner(report),
                         "attnscope::h5::external_target(long) /ci/work/main/core/io/hdf5_discovery.cpp:26")

    def test_libfuzzer_frames_only_is_unknown(self):
        report = "\n".join([
            frame(0, "fuzzer::Fuzzer::CrashCallback()", "(%s+0x2000)" % FUZZER),
            frame(1, "__libc_start_main", "(/lib/x86_64-linux-gnu/libc.so.6+0x271ca)"),
        ])
        self.assertEqual(triage.owner(report), "unknown")


class Rerun(unittest.TestCase):
    """A hang that allocates in a loop is caught inside malloc's slow unwinder and reported
    with "<empty stack>"; the reproducer is run again with the fast unwinder."""

    def fake_fuzzer(self, slow_report, fast_report):
        # An executable that fails with slow_report or fast_report by ASAN_OPTIONS's unwinder.
        script = os.path.join(tempfile.mkdtemp(), "fuzzer")
        with open(script, "w") as out:
            out.write("#!%s\nimport os, sys\n" % sys.executable)
            out.write("fast = 'fast_unwind_on_malloc=1' in os.environ['ASAN_OPTIONS']\n")
            out.write("sys.stderr.write(%r if fast else %r)\nsys.exit(1)\n"
                      % (fast_report, slow_report))
        os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
        return script

    def test_empty_stack_is_run_again_with_the_fast_unwinder(self):
        oom = "\n".join(["==1== ERROR: libFuzzer: out-of-memory (used: 2107Mb; limit: 2048Mb)",
                         frame(0, "malloc", "(%s+0x16031e)" % FUZZER),
                         "    #1 0x7f7d355233e4  (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x1233e4)"])
        script = self.fake_fuzzer("timeout\n    <empty stack>\n", oom)
        run, where = triage.rerun(script, "repro")
        self.assertEqual(where, "hdf5")
        self.assertIn("out-of-memory", run.stderr)

    def test_a_report_with_frames_is_not_run_again(self):
        mine = frame(0, "attnscope::h5::discover(long)", "/ci/core/io/hdf5_discovery.cpp:80")
        hdf5 = frame(0, "H5G__stab_iterate", "(/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x1)")
        script = self.fake_fuzzer(mine, hdf5)
        _, where = triage.rerun(script, "repro")
        self.assertEqual(where, "attnscope::h5::discover(long) /ci/core/io/hdf5_discovery.cpp:80")


if __name__ == "__main__":
    unittest.main(verbosity=2)
