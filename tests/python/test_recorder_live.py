"""Live runs (issue 21): a dump open elsewhere never stops recording. Another process holding
the dump open through h5py (HDF5's shared lock, as a notebook or viewer does) while the
recorder writes more steps; this very process holding it open read-only (HDF5 refuses to
reopen it for writing: the steps wait in memory and are written once it closes, or go to
DUMP.pending-PID.h5 at close); and readers: attnscope-cli reads a dump a writer holds open
with HDF5's lock, and names attnscope_record's live marker when a read fails mid-write."""
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

import h5py
import torch
import torch.nn.functional as F

from attnscope_record import Recorder
from attnscope_test_util import cli, cli_json

HOLDER = """
import sys, time, h5py
f = h5py.File(sys.argv[1], "r")  # default locking: a shared lock held until killed
print(len(f.keys()), flush=True)
time.sleep(600)
"""


def step(rec, number):
    """One recorded SDPA forward + backward, q, k, v [1, 2, 5, 8]."""
    torch.manual_seed(number)
    q, k, v = (torch.randn(1, 2, 5, 8, requires_grad=True) for _ in range(3))
    with rec.step(number):
        F.scaled_dot_product_attention(q, k, v).sum().backward()


def steps_in(path):
    """Step groups of the dump, read by a fresh process (no handle of this one involved)."""
    out = subprocess.run([sys.executable, "-c", "import sys, h5py; f = h5py.File(sys.argv[1], "
                          "'r', locking=False); print(' '.join(sorted(f.keys())))", path],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


class LiveDumpTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "attn.h5")

    def tearDown(self):
        self.dir.cleanup()

    def test_dump_held_open_by_another_process_never_stops_recording(self):
        rec = Recorder(self.path)
        step(rec, 0)
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, self.path],
                                  stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(holder.stdout.readline().strip(), "1")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for n in (1, 2, 3):
                    step(rec, n)
                    self.assertIn("step_%06d" % n, steps_in(self.path))  # written, not queued
            self.assertIsNone(holder.poll(), "the holder kept the file open throughout")
        finally:
            holder.kill()
            holder.wait()
            holder.stdout.close()
        self.assertEqual([str(w.message) for w in caught], [])
        self.assertIsNone(rec.stopped)
        self.assertFalse(os.path.exists(self.path + ".writing"))
        doc = cli_json("scan", self.path, expect=0)
        self.assertEqual([c["path"] for c in doc["cases"]],
                         ["/step_%06d/layer_00" % n for n in range(4)])

    def test_same_process_read_handle_queues_steps_until_it_closes(self):
        rec = Recorder(self.path)
        step(rec, 0)
        reader = h5py.File(self.path, "r")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step(rec, 1)
            step(rec, 2)
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIn("wait in memory", str(caught[0].message))
        self.assertEqual(rec.written, ["/step_%06d/layer_00" % n for n in range(3)])
        self.assertEqual(steps_in(self.path), ["step_000000"])
        reader.close()
        step(rec, 3)  # the queue goes first, in order
        self.assertEqual(steps_in(self.path), ["step_%06d" % n for n in range(4)])
        rec.close()
        self.assertEqual(len(cli_json("scan", self.path, expect=0)["cases"]), 4)

    def test_queue_left_at_close_goes_to_a_pending_file(self):
        rec = Recorder(self.path)
        step(rec, 0)
        reader = h5py.File(self.path, "r")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                step(rec, 1)
                rec.close()
        finally:
            reader.close()
        pending = "%s.pending-%d.h5" % (self.path, os.getpid())
        self.assertIn(pending, str(caught[-1].message))
        self.assertEqual(steps_in(pending), ["step_000001"])
        self.assertEqual(len(cli_json("scan", pending, expect=0)["cases"]), 1)

    def test_cli_reads_a_dump_a_writer_holds_open_with_its_lock(self):
        rec = Recorder(self.path)
        step(rec, 0)
        rec.close()
        with h5py.File(self.path, "a"):  # HDF5's exclusive lock, as a locking writer holds it
            code, out, err = cli("info", self.path)
        self.assertEqual(code, 0, err)
        self.assertIn("/step_000000/layer_00", out)

    def test_failed_read_names_the_live_recorder_not_a_corrupt_file(self):
        rec = Recorder(self.path)
        step(rec, 0)
        rec.close()
        with open(self.path, "r+b") as f:  # what a reader may meet while a step is written
            f.truncate(os.path.getsize(self.path) // 2)
        code, _, err = cli("info", self.path)
        self.assertEqual(code, 2)
        self.assertIn("truncated or corrupt", err)
        with open(self.path + ".writing", "w") as f:
            f.write("%d %s\n" % (os.getpid(), os.uname().nodename))
        code, _, err = cli("info", self.path)
        self.assertEqual(code, 2)
        self.assertIn("being written right now by attnscope_record (pid %d on %s)"
                      % (os.getpid(), os.uname().nodename), err)
        self.assertIn("a training run still recording?", err)
        self.assertIn("attnscope-cli scan --follow", err)
        self.assertNotIn("re-copy", err)
        # A marker left by a run that died while writing is stale.
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        with open(self.path + ".writing", "w") as f:
            f.write("%d %s\n" % (dead.pid, os.uname().nodename))
        code, _, err = cli("info", self.path)
        self.assertIn("truncated or corrupt", err)


if __name__ == "__main__":
    unittest.main()
