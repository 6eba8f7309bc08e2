"""Attention health statistics (issue 45): what Recorder(stats=...) writes to /health and how
`attnscope-cli health` reads it. The statistics of an SDPA call equal the ones computed here
from its tensors (GQA, causal, a padding mask, a packed-length sample); a step with no
non-finite value leaves a statistics-only dump that `health` reads and `scan` explains;
stats=False writes none; a malformed block is refused naming the file, the block and the
problem; a block that crashes libhdf5 is refused by the probe, never read."""
import json
import math
import os
import subprocess
import tempfile
import unittest

import h5py
import numpy as np
import torch
import torch.nn.functional as F

from attnscope_record import Recorder
from attnscope_record import stats

CLI = os.environ.get("ATTNSCOPE_CLI", "attnscope-cli")


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


def blocks(path):
    """(rows float32 [N, C], columns, calls) of every /health block, in order."""
    with h5py.File(path, "r") as f:
        group = f["health"]
        parts = [group[name] for name in sorted(group)]
        rows = np.concatenate([d[()] for d in parts])
        columns = parts[0].attrs["columns"].split(",")
        calls = [c for d in parts for c in json.loads(d.attrs["calls"])]
    return rows, columns, calls


def step(q, k, v, mask=None, causal=False, gqa=False):
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                       enable_gqa=gqa)
    o.square().sum().backward()


class HealthStatistics(unittest.TestCase):
    def test_values_match_the_call(self):
        torch.manual_seed(0)
        b, h, hk, s, d = 2, 4, 2, 12, 8
        q = (torch.randn(b, h, s, d) * 3).requires_grad_()
        k = torch.randn(b, hk, s, d).requires_grad_()
        v = torch.randn(b, hk, s, d).requires_grad_()
        mask = torch.ones(b, 1, s, s, dtype=torch.bool)
        mask[1, ..., 9:] = False  # sequence 1 has 9 keys
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "dump.h5")
            rec = Recorder(path, when="nonfinite")
            with rec.step(0):
                step(q, k, v, mask=mask, causal=True, gqa=True)
            rec.close()
            rows, columns, calls = blocks(path)
            with h5py.File(path, "r") as f:
                self.assertEqual(f.attrs["attnscope_schema_minor"], 2)
                self.assertFalse(any(n.startswith("step_") for n in f))  # nothing non-finite
        self.assertEqual(columns, list(stats.COLUMNS))
        self.assertEqual(len(calls), 1)
        self.assertEqual((calls[0]["heads"], calls[0]["kv_heads"], calls[0]["rows"]), (4, 2, 12))
        at = {name: rows[:, i] for i, name in enumerate(columns)}
        kk = k.detach().repeat_interleave(2, dim=1)
        logits = q.detach() @ kk.transpose(-1, -2) / math.sqrt(d)
        np.testing.assert_allclose(at["max_abs_logit"], logits.abs().amax(dim=(0, 2, 3)),
                                   rtol=1e-5)
        bound = (q.detach().norm(dim=-1).amax(dim=(0, 2)) *
                 kk.norm(dim=-1).amax(dim=(0, 2)) / math.sqrt(d))
        np.testing.assert_allclose(at["logit_bound"], bound, rtol=1e-5)
        self.assertTrue((at["logit_bound"] >= at["max_abs_logit"]).all())
        allowed = mask & torch.ones(s, s, dtype=torch.bool).tril()
        masked = logits.masked_fill(~allowed, float("-inf"))
        p = masked.softmax(-1)
        counted = allowed.sum(-1).expand(b, h, s) >= 2  # row 0 sees one key
        entropy = torch.special.entr(p).sum(-1)
        lse = masked.logsumexp(-1)
        for head in range(h):
            rows_h = counted[:, head]
            np.testing.assert_allclose(at["mean_entropy"][head],
                                       entropy[:, head][rows_h].mean(), rtol=1e-4)
            np.testing.assert_allclose(at["min_lse"][head], lse[:, head][rows_h].min(),
                                       rtol=1e-4)
            np.testing.assert_allclose(at["dominant_share"][head],
                                       (p[:, head].amax(-1)[rows_h] > 0.99).float().mean(),
                                       rtol=1e-5)
        np.testing.assert_allclose(at["norm_dk"], k.grad.square().sum(dim=(0, 2, 3)).sqrt()
                                   .repeat_interleave(2), rtol=1e-5)
        np.testing.assert_allclose(at["norm_dq"], q.grad.square().sum(dim=(0, 2, 3)).sqrt(), rtol=1e-5)
        self.assertTrue((at["nonfinite"] == 0).all())

    def test_statistics_only_dump_reads_in_health_and_scan_explains(self):
        q, k, v = (torch.randn(1, 2, 6, 4, requires_grad=True) for _ in range(3))
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "dump.h5")
            rec = Recorder(path, when="nonfinite")
            for n in range(3):
                with rec.step(n):
                    step(q, k, v)
            rec.close()
            done = cli("health", path, "--json")
            self.assertEqual(done.returncode, 0, done.stderr)
            report = json.loads(done.stdout)
            self.assertEqual((report["calls"], report["first_step"], report["last_step"]),
                             (3, 0, 2))
            self.assertEqual(len(report["series"]), 2)
            self.assertEqual(report["series"][0]["steps"], [0, 1, 2])
            self.assertIn("fp32 scores", report["series"][0]["limit_text"])
            done = cli("scan", path)
            self.assertEqual(done.returncode, 2)
            self.assertIn("health statistics", done.stderr)
            self.assertIn("attnscope-cli health", done.stderr)

            plain = os.path.join(folder, "plain.h5")
            rec = Recorder(plain, stats=False)
            with rec.step(0):
                step(q, k, v)
            rec.close()
            with h5py.File(plain, "r") as f:
                self.assertNotIn("health", f)
            done = cli("health", plain)
            self.assertEqual(done.returncode, 2)
            self.assertIn("holds no health statistics", done.stderr)

    def test_malformed_block_is_refused_by_name(self):
        q, k, v = (torch.randn(1, 2, 6, 4, requires_grad=True) for _ in range(3))
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "dump.h5")
            rec = Recorder(path, when="nonfinite")
            with rec.step(0):
                step(q, k, v)
            rec.close()
            with h5py.File(path, "a") as f:
                f["health/block_000000"].attrs["columns"] = "max_abs_logit,head"
            done = cli("health", path)
            self.assertEqual(done.returncode, 2)
            self.assertIn(path, done.stderr)
            self.assertIn("/health/block_000000", done.stderr)
            self.assertIn("the first must be 'head'", done.stderr)
            with h5py.File(path, "a") as f:
                del f["health/block_000000"]
                f.create_dataset("health/block_000000", data=np.zeros((2, 14), np.float32),
                                 chunks=(1, 14), maxshape=(None, 14))
            done = cli("health", path)
            self.assertEqual(done.returncode, 2)
            self.assertIn("not contiguous", done.stderr)


    def test_health_as_a_soft_link_is_never_followed(self):
        # The probe test-reads only a /health group it counts (a hard link); the reader reads
        # no other, so a soft link to blocks the probe never saw is not read.
        q, k, v = (torch.randn(1, 2, 6, 4, requires_grad=True) for _ in range(3))
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "dump.h5")
            rec = Recorder(path, stats=True)  # cases and statistics
            with rec.step(0):
                step(q, k, v)
            rec.close()
            with h5py.File(path, "a") as f:
                f.move("health", "elsewhere")
                f["health"] = h5py.SoftLink("/elsewhere")
            done = cli("health", path)
            self.assertEqual(done.returncode, 2)
            self.assertIn("holds no health statistics", done.stderr)

    def test_statistics_that_crash_libhdf5_are_refused_not_read(self):
        # A fuzzed recording whose `columns` string points into a corrupt global heap: libhdf5
        # faults reading it, in attnscope's probe process; `health` says so and exits 2.
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "bad",
                            "fuzz_h5hg_read_health_columns_heap.h5")
        done = cli("health", path)
        self.assertEqual(done.returncode, 2)
        self.assertIn("health statistics cannot be read", done.stderr)
        # A plain build dies of the signal ("crashed (signal 11 ...)"); under ASan the sanitizer
        # catches the fault and exits with its own status ("failed abnormally (probe exit ...").
        self.assertRegex(done.stderr,
                         r"/health: the HDF5 library (crashed \(signal|failed abnormally \(probe exit)")


if __name__ == "__main__":
    unittest.main()
