#!/usr/bin/env python3
"""Pins fuzz/triage.py's verdict on whose code a sanitizer report blames.

    fuzz_triage_test.py TRIAGE_DIR

The first frame outside the sanitizer runtime, libFuzzer and libc decides. ASan interceptors
are symbolized inside the fuzzer binary without a source line ("in strdup (dump_reader_fuzz+0x..)"),
so they must be skipped too (CI once failed on an HDF5 strdup overflow blamed on "strdup").
"""
import sys
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
