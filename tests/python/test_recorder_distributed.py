"""Recorder under torch.distributed: one file per rank in the run folder with the rank's root
attributes, sync= making every rank dump the step in which one rank saw a NaN, a sync that
times out degrading to local recording without hanging the job, the context-parallel shard
attributes, and attnscope-cli naming the rank that went bad; in-process: argument checks and
sync= without a process group."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

import h5py
import numpy as np
import torch
import torch.nn.functional as F

import ddp_nan_run
from attnscope_record import Recorder
from attnscope_record.distributed import rank_file

TORCHRUN_SECONDS = 100  # longer than the workers' watchdog, ddp_nan_run.WATCHDOG_SECONDS
BOTH_LAYERS = ["/step_000001/layer_00", "/step_000001/layer_01"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(folder):
    """(returncode, stdout, stderr, seconds) of ddp_nan_run.py on 2 CPU ranks. A job running
    past TORCHRUN_SECONDS is stopped (SIGTERM: torchrun stops its workers, then SIGKILL) and
    fails the test; the workers' own watchdog ends them even if torchrun dies first."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--max_restarts",
           "0", ddp_nan_run.__file__, folder]
    start = time.monotonic()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as job:
        try:
            out, err = job.communicate(timeout=TORCHRUN_SECONDS)
        except subprocess.TimeoutExpired:
            job.terminate()
            try:
                out, err = job.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                job.kill()
                out, err = job.communicate()
            raise AssertionError(f"torchrun still running after {TORCHRUN_SECONDS} s\n"
                                 f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    return job.returncode, out, err, time.monotonic() - start


def cases(path):
    """Group paths of the cases (groups holding q) in a dump."""
    with h5py.File(path, "r") as f:
        out = []
        f.visititems(lambda name, o: out.append("/" + name)
                     if isinstance(o, h5py.Group) and "q" in o else None)
        return sorted(out)


def root(path):
    with h5py.File(path, "r") as f:
        return dict(f.attrs)


class TorchrunTest(unittest.TestCase):
    """One torchrun job of ddp_nan_run.py for the class; each test reads what it left."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.addClassCleanup(cls.dir.cleanup)
        code, out, cls.stderr, cls.seconds = torchrun(cls.dir.name)
        if code != 0:
            raise AssertionError(f"torchrun: exit {code}\nstdout:\n{out[-3000:]}\n"
                                 f"stderr:\n{cls.stderr[-3000:]}")

    def rank_path(self, run, rank):
        return os.path.join(self.dir.name, run, f"rank_{rank:05d}.h5")

    def test_each_rank_file_has_its_identity(self):
        pids = set()
        for rank in (0, 1):
            attrs = root(self.rank_path("sync", rank))
            self.assertEqual((attrs["rank"], attrs["world_size"], attrs["local_rank"]),
                             (rank, 2, rank))
            self.assertEqual((attrs["host"], attrs["process_group"]),
                             (socket.gethostname(), "gloo"))
            self.assertEqual(attrs["attnscope_schema"], 1)
            pids.add(int(attrs["pid"]))
        self.assertEqual(len(pids), 2)
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir.name, "sync"))),
                         ["rank_00000.h5", "rank_00001.h5"])

    def test_without_sync_only_the_rank_that_saw_the_nan_writes(self):
        self.assertEqual(cases(self.rank_path("local", 1)), BOTH_LAYERS)
        # a rank that writes no case creates no file
        self.assertEqual(os.listdir(os.path.join(self.dir.name, "local")), ["rank_00001.h5"])
        self.assertNotIn("cp_rank", root(self.rank_path("local", 1)))

    def test_with_sync_every_rank_writes_the_step(self):
        for rank in (0, 1):
            self.assertEqual(cases(self.rank_path("sync", rank)), BOTH_LAYERS)
        with h5py.File(self.rank_path("sync", 0), "r") as f:
            self.assertTrue(np.isfinite(f["/step_000001/layer_01/o"][()]).all())
        with h5py.File(self.rank_path("sync", 1), "r") as f:
            self.assertFalse(np.isfinite(f["/step_000001/layer_01/o"][()]).all())
        self.assertNotIn("after 10 s", self.stderr)

    def test_context_parallel_attributes(self):
        for rank, ranges in ((0, [[0, 4], [12, 16]]), (1, [[4, 8], [8, 12]])):
            attrs = root(self.rank_path("sync", rank))
            self.assertEqual((attrs["cp_rank"], attrs["cp_size"]), (rank, 2))
            self.assertEqual(attrs["cp_ranges"].dtype, np.int64)
            self.assertEqual(attrs["cp_ranges"].tolist(), ranges)

    def test_rank_left_waiting_warns_records_locally_and_the_job_ends(self):
        self.assertIn("sync of step 1 timed out after 3 s: heard from 1 of 2 ranks; this rank "
                      "records by its own when= filter", self.stderr)
        self.assertEqual(self.stderr.count("sync of step"), 1)  # no other step failed
        self.assertLess(self.seconds, ddp_nan_run.SKIP_SYNC_SECONDS + 60)
        self.assertEqual(cases(self.rank_path("skip", 1)), BOTH_LAYERS)
        self.assertFalse(os.path.exists(self.rank_path("skip", 0)))


    def test_cli_scan_of_the_run_folder_names_rank_1_and_its_data(self):
        # attnscope-cli reads the folder as one run: the NaN entered rank 1's first layer with
        # its batch (nonfinite_input), and rank 0 recorded the same step clean.
        for run, files in (("sync", 2), ("local", 1)):
            scan = subprocess.run([os.environ["ATTNSCOPE_CLI"], "scan", "--json",
                                   os.path.join(self.dir.name, run)],
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(scan.returncode, 1, scan.stderr)
            doc = json.loads(scan.stdout)
            self.assertEqual(len(doc["files"]), files)
            first = doc["first_bad"]
            self.assertEqual((first["step"], first["layer"], first["rank"], first["scope"]),
                             (1, 0, 1, "one_rank"), first["text"])
            self.assertIn("nonfinite_input", first["kinds"])
            self.assertIn("on rank 1 only (of 2 ranks): its inputs were already non-finite",
                          first["text"])


class WithoutProcessGroupTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "dump.h5")

    def tearDown(self):
        self.dir.cleanup()

    def test_bad_context_parallel_raises(self):
        for bad in ([[0, 4]], {"rank": 0, "size": 2}, {"rank": 2, "size": 2, "ranges": [[0, 4]]},
                    {"rank": True, "size": 2, "ranges": [[0, 4]]},
                    {"rank": 0, "size": 2, "ranges": []},
                    {"rank": 0, "size": 2, "ranges": [[4, 4]]},
                    {"rank": 0, "size": 2, "ranges": [[0, 4.0]]},
                    {"rank": 0, "size": 2, "ranges": [[0, 8], [4, 12]]},
                    {"rank": 0, "size": 2, "ranges": [[0, 4]], "method": "ring"}):
            with self.assertRaises(ValueError, msg=repr(bad)):
                Recorder(self.path, context_parallel=bad)

    def test_bad_sync_raises(self):
        for bad in (0, -1.0, "30"):
            with self.assertRaises(ValueError, msg=repr(bad)):
                Recorder(self.path, sync=bad)

    def test_sync_without_process_group_warns_and_records_as_usual(self):
        rec = Recorder(self.path, when="nonfinite", sync=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step in range(3):
                with rec.step(step):
                    q = torch.randn(1, 2, 4, 8)
                    q[0, 0, 0, 0] = float("nan") if step == 1 else 0.0
                    q.requires_grad_(True)
                    F.scaled_dot_product_attention(q, q, q).sum().backward()
        messages = [str(w.message) for w in caught]
        self.assertEqual(sum("sync= needs" in m for m in messages), 1, messages)
        self.assertEqual(cases(self.path), ["/step_000001/layer_00"])
        self.assertNotIn("rank", root(self.path))

    def test_rank_file_naming(self):
        folder = os.path.join(self.dir.name, "runs", "nan_hunt")
        self.assertEqual(rank_file(folder + ".h5", 1), os.path.join(folder, "rank_00001.h5"))
        self.assertEqual(rank_file(folder, 12), os.path.join(folder, "rank_00012.h5"))
        self.assertTrue(os.path.isdir(folder))


if __name__ == "__main__":
    unittest.main()
