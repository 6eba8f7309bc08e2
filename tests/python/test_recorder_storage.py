"""Recorder storage: exact fp32/fp16/bf16 values (bf16 as uint16 + dtype attribute), schema-1
attributes and mask shapes, GQA, the size budget, unwritable paths and in-place changes --
every failure warns, stops recording and leaves the training step's results untouched."""
import os
import tempfile
import unittest
import warnings

import h5py
import numpy as np
import torch
import torch.nn.functional as F

from attnscope_record import Recorder
from attnscope_test_util import read_case


def sdpa_step(dtype=torch.float32, device="cpu", **sdpa_kwargs):
    """One SDPA forward + backward on fixed inputs q [2, 4, 6, 16], k/v [2, Hk, 6, 16]."""
    torch.manual_seed(11)
    hk = 2 if sdpa_kwargs.get("enable_gqa") else 4
    q = torch.randn(2, 4, 6, 16, device=device).to(dtype).requires_grad_(True)
    k = torch.randn(2, hk, 6, 16, device=device).to(dtype).requires_grad_(True)
    v = torch.randn(2, hk, 6, 16, device=device).to(dtype).requires_grad_(True)
    o = F.scaled_dot_product_attention(q, k, v, **sdpa_kwargs)
    o.float().square().sum().backward()
    return q, k, v, o


class StorageTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "dump.h5")

    def tearDown(self):
        self.dir.cleanup()

    def check_exact(self, dtype, device="cpu"):
        rec = Recorder(self.path)
        with rec.step(3):
            q, k, v, o = sdpa_step(dtype, device)
        t, attrs = read_case(self.path, "/step_000003/layer_00")
        for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("dq", q.grad),
                        ("dk", k.grad), ("dv", v.grad)):
            self.assertEqual(t[name].dtype, dtype, name)
            self.assertTrue(torch.equal(t[name], x.detach().cpu()), name)
        self.assertEqual(attrs["dtype"], str(dtype).replace("torch.", ""))
        return attrs

    def test_float32_exact_with_schema_attributes(self):
        attrs = self.check_exact(torch.float32)
        self.assertEqual((attrs["layout"], attrs["step"], attrs["layer"], bool(attrs["causal"])),
                         ("BHSD", 3, 0, False))
        self.assertEqual(attrs["scale"], 0.25)
        self.assertNotIn("causal_align", attrs)

    def test_float16_exact(self):
        self.check_exact(torch.float16)

    def test_bfloat16_stored_as_uint16_bits_exactly(self):
        self.check_exact(torch.bfloat16)
        torch.manual_seed(11)
        bits = torch.randn(2, 4, 6, 16).to(torch.bfloat16).view(torch.int16).numpy()
        with h5py.File(self.path, "r") as f:
            d = f["/step_000003/layer_00/q"]
            self.assertEqual((d.dtype, d.attrs["dtype"]), (np.uint16, "bfloat16"))
            self.assertTrue(np.array_equal(d[()], bits.view(np.uint16)))

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_cuda_tensors_recorded_exactly(self):
        self.check_exact(torch.bfloat16, "cuda")

    def test_masks_get_four_dims_and_bias_keeps_its_dtype(self):
        rec = Recorder(self.path)
        keep = torch.tensor([True, True, True, True, False, False]).expand(6, 6)
        bias = torch.zeros(2, 1, 6, 6, dtype=torch.float16)
        bias[1, 0, :, 3:] = -1e4
        with rec.step(0):
            sdpa_step(torch.float16, attn_mask=keep)
        with rec.step(1):
            sdpa_step(torch.float16, attn_mask=bias, is_causal=False, scale=0.125)
        m, _ = read_case(self.path, "/step_000000/layer_00")
        self.assertEqual((m["mask"].dtype, tuple(m["mask"].shape)), (torch.bool, (1, 1, 6, 6)))
        self.assertTrue(torch.equal(m["mask"][0, 0], keep))
        b, attrs = read_case(self.path, "/step_000001/layer_00")
        self.assertTrue(torch.equal(b["bias"], bias))
        self.assertEqual(attrs["scale"], 0.125)

    def test_causal_and_gqa_attributes(self):
        rec = Recorder(self.path)
        with rec.step(0):
            sdpa_step(is_causal=True, enable_gqa=True)
        t, attrs = read_case(self.path, "/step_000000/layer_00")
        self.assertEqual((bool(attrs["causal"]), attrs["causal_align"], bool(attrs["enable_gqa"])),
                         (True, "top_left", True))
        self.assertEqual([tuple(t[n].shape) for n in ("q", "k", "dk", "do")],
                         [(2, 4, 6, 16), (2, 2, 6, 16), (2, 2, 6, 16), (2, 4, 6, 16)])

    def test_budget_bounds_the_file_and_stops_recording(self):
        # One case: 8 tensors x 768 floats x 4 bytes = 24 KiB of data plus headers.
        rec = Recorder(self.path, budget_mb=0.15)
        with self.assertWarnsRegex(RuntimeWarning, "size budget of 0.1 MiB .* reached.*"
                                   "recording stopped, the training step goes on"):
            for s in range(10):
                with rec.step(s):
                    q, k, v, o = sdpa_step()
        self.assertEqual(rec.written, [f"/step_00000{s}/layer_00" for s in range(2)])
        self.assertIn("hint: raise budget_mb", rec.stopped)
        self.assertLessEqual(os.path.getsize(self.path), 0.15 * 2**20)
        ref = sdpa_step()
        self.assertTrue(torch.equal(o, ref[3]) and torch.equal(q.grad, ref[0].grad))
        self.assertIsNone(read_case(self.path, "/step_000001/layer_00")[0].get("lse"))

    def test_unwritable_path_warns_and_the_step_goes_on(self):
        for path in (os.path.join(self.dir.name, "no_such_dir", "dump.h5"), self.dir.name):
            rec = Recorder(path)
            with self.assertWarnsRegex(RuntimeWarning, "cannot write /step_000000/layer_00 to "
                                       + path.replace(".", r"\.") + ".*hint: check"):
                with rec.step(0):
                    q, k, v, o = sdpa_step()
            self.assertEqual(rec.written, [])
            ref = sdpa_step()
            self.assertTrue(torch.equal(o, ref[3]) and torch.equal(v.grad, ref[2].grad))
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with rec.step(1):
                    sdpa_step()  # stopped: no second warning, no write attempt

    def test_in_place_change_after_the_call_is_not_written(self):
        rec = Recorder(self.path)
        with self.assertWarnsRegex(RuntimeWarning, "call 0: k, v changed in place after the call"):
            with rec.step(0):
                torch.manual_seed(0)
                q, k = torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8)
                F.scaled_dot_product_attention(q, k, k)
                F.scaled_dot_product_attention(q, q, q)
                k.mul_(2)
        self.assertEqual(rec.written, ["/step_000000/layer_01"])


if __name__ == "__main__":
    unittest.main()
