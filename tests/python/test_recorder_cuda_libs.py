"""xformers and FlashAttention hooks, against pure-torch stand-ins with the real signatures
(standin_attention_libs.py: the libraries need CUDA): tensors and gradients as passed, layouts
BSHD and THD (cu_seqlens_q/k as int32, max_seqlen_q/k, one batch squeezed), causal alignment,
softcap, window and ALiBi materialised into mask and bias (checked by recomputing the output
from the recorded datasets), lse, backend and library_version; import-time bindings patched
and restored; calls the schema cannot express warn once and run unrecorded; a library the user
did not import is not imported; the cases scan without error findings."""
import importlib
import math
import os
import sys
import tempfile
import unittest
import warnings

import torch

from attnscope_record import Recorder
from attnscope_test_util import attention_math, read_case, scan_errors
import standin_attention_libs as standin

B, H, HK, D = 2, 4, 2, 8


def bshd(b, s, h, seed):
    torch.manual_seed(seed)
    return torch.randn(b, s, h, D, requires_grad=True)


def to_bhsd(t):
    return t.transpose(-3, -2)


class CudaLibsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "libs.h5")
        self.libs = standin.installed()
        self.modules = self.libs.__enter__()

    def tearDown(self):
        self.libs.__exit__(None, None, None)
        self.dir.cleanup()

    def record(self, *calls):
        """Records one step running each call () -> (inputs, output), then backward through
        the sum of o.square().sum(); returns ([(inputs, o)], written cases, attnscope
        warnings). The calls look the library functions up when they run."""
        rec = Recorder(self.path)
        runs = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with rec.step(0):
                for call in calls:
                    inputs, out = call()
                    runs.append((inputs, out if isinstance(out, torch.Tensor) else out[0]))
                sum(o.square().sum() for _, o in runs).backward()
        ours = [str(c.message) for c in caught if "attnscope_record" in str(c.message)]
        return runs, [read_case(self.path, g) for g in rec.written], ours

    def assert_recorded(self, run, case):
        """Datasets are the call's tensors and gradients as passed."""
        (q, k, v), o = run
        t, _ = case
        for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("do", 2 * o), ("dq", q.grad),
                        ("dk", k.grad), ("dv", v.grad)):
            torch.testing.assert_close(t[name], x.detach(), rtol=0, atol=0, msg=name)

    def assert_replays_bshd(self, case, causal_offset=None, softcap=0.0):
        """attnscope's computation from the recorded datasets (heads repeated for GQA, causal
        key j <= i + causal_offset) gives the recorded o and dq."""
        t, attrs = case
        q, k, v, do = (to_bhsd(t[n]) for n in ("q", "k", "v", "do"))
        k, v = (x.repeat_interleave(q.shape[1] // k.shape[1], 1) for x in (k, v))
        mask = t.get("mask")
        if causal_offset is not None:
            sq, sk = q.shape[2], k.shape[2]
            causal = torch.arange(sk)[None, :] <= torch.arange(sq)[:, None] + causal_offset
            mask = causal if mask is None else mask & causal
        ref = attention_math(q, k, v, do, attrs["scale"], mask, t.get("bias"), softcap=softcap)
        for name in ("o", "dq"):
            torch.testing.assert_close(t[name].double(), to_bhsd(ref[name]), rtol=1e-5,
                                       atol=1e-5, msg=name)

    def test_flash_attn_func_bottom_right_causal_softcap_gqa_and_lse(self):
        flash = sys.modules["flash_attn"]

        def call():
            q, k, v = bshd(B, 5, H, 1), bshd(B, 9, HK, 2), bshd(B, 9, HK, 3)
            return (q, k, v), flash.flash_attn_func(q, k, v, causal=True, softcap=3.0,
                                                    return_attn_probs=True)

        runs, [case], ours = self.record(call)
        self.assertEqual(ours, [])
        self.assert_recorded(runs[0], case)
        t, attrs = case
        self.assertEqual((attrs["backend"], attrs["library_version"], attrs["layout"],
                          attrs["causal_align"], attrs["softcap"], attrs["function"]),
                         ("flash_attn", standin.FLASH_ATTN_VERSION, "BSHD", "bottom_right", 3.0,
                          "flash_attn_func"))
        self.assertTrue(attrs["causal"])
        self.assertEqual(attrs["scale"], 1 / math.sqrt(D))
        self.assertEqual((t["lse"].shape, t["lse"].dtype), ((B, H, 5), torch.float32))
        self.assertFalse({"mask", "bias"} & set(t))
        self.assert_replays_bshd(case, causal_offset=9 - 5, softcap=3.0)

    def test_flash_attn_window_and_alibi_are_materialised(self):
        flash = sys.modules["flash_attn"]
        slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])

        def windowed():
            q, k, v = bshd(B, 6, H, 4), bshd(B, 8, H, 5), bshd(B, 8, H, 6)
            return (q, k, v), flash.flash_attn_func(q, k, v, softmax_scale=0.3,
                                                    window_size=(2, 1), alibi_slopes=slopes)

        def causal_alibi():
            q, k, v = bshd(B, 6, H, 7), bshd(B, 6, H, 8), bshd(B, 6, H, 9)
            return (q, k, v), flash.flash_attn_func(q, k, v, causal=True,
                                                    alibi_slopes=slopes[None].repeat(B, 1))

        runs, cases, ours = self.record(windowed, causal_alibi)
        self.assertEqual(ours, [])
        (t0, a0), (t1, a1) = cases
        i, j = torch.arange(6)[:, None] + 2, torch.arange(8)[None, :]
        self.assertTrue(torch.equal(t0["mask"], ((j >= i - 2) & (j <= i + 1))[None, None]))
        self.assertEqual((a0["scale"], bool(a0["causal"]), a0["mask_convention"]),
                         (0.3, False, "attend"))
        self.assertEqual((t0["bias"].shape, t0["bias"].dtype), ((1, H, 6, 8), torch.float32))
        torch.testing.assert_close(t0["bias"][0, 1], -0.25 * (i - j).abs().float())
        self.assertEqual(t1["bias"].shape, (B, H, 1, 6))  # the same for every row
        torch.testing.assert_close(t1["bias"][1, 2, 0], 0.125 * torch.arange(6.0))
        for run, case, offset in zip(runs, cases, (None, 0)):
            self.assert_recorded(run, case)
            self.assert_replays_bshd(case, causal_offset=offset)

    def test_flash_attn_varlen_is_a_packed_thd_case(self):
        flash = sys.modules["flash_attn"]
        cu_q = torch.tensor([0, 3, 8, 12], dtype=torch.int32)
        cu_k = torch.tensor([0, 5, 11, 16], dtype=torch.int32)

        def call():
            torch.manual_seed(10)
            q, k, v = (torch.randn(t, h, D, requires_grad=True)
                       for t, h in ((12, H), (16, HK), (16, HK)))
            return (q, k, v), flash.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 6,
                                                           causal=True, return_attn_probs=True)

        runs, [case], ours = self.record(call)
        self.assertEqual(ours, [])
        self.assert_recorded(runs[0], case)
        t, attrs = case
        self.assertEqual((attrs["layout"], attrs["max_seqlen_q"], attrs["max_seqlen_k"],
                          attrs["causal_align"], attrs["function"]),
                         ("THD", 5, 6, "bottom_right", "flash_attn_varlen_func"))
        for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
            self.assertEqual(t[name].dtype, torch.int32)
            self.assertTrue(torch.equal(t[name], cu), name)
        self.assertEqual((t["q"].shape, t["dk"].shape, t["lse"].shape),
                         ((12, H, D), (16, HK, D), (H, 12)))

    def test_xformers_biases(self):
        ops = sys.modules["xformers.ops"]
        bias = torch.randn(B, H, 5, 7) / 2

        def tensor_bias():
            q, k, v = bshd(B, 5, H, 11), bshd(B, 7, H, 12), bshd(B, 7, H, 13)
            return (q, k, v), ops.memory_efficient_attention(q, k, v, attn_bias=bias, scale=0.4)

        def lower_triangular():
            q, k, v = bshd(B, 5, H, 14), bshd(B, 7, H, 15), bshd(B, 7, H, 16)
            return (q, k, v), ops.memory_efficient_attention(q, k, v, ops.LowerTriangularMask())

        def with_tensor_bias():  # a subclass adds a term: materialised
            q, k, v = bshd(B, 5, H, 17), bshd(B, 5, H, 18), bshd(B, 5, H, 19)
            mask = ops.LowerTriangularMaskWithTensorBias(bias[..., :5])
            return (q, k, v), sys.modules["xformers.ops.fmha"].memory_efficient_attention(
                q, k, v, mask)

        runs, cases, ours = self.record(tensor_bias, lower_triangular, with_tensor_bias)
        self.assertEqual(ours, [])
        (t0, a0), (t1, a1), (t2, a2) = cases
        self.assertTrue(torch.equal(t0["bias"], bias))
        self.assertEqual((a0["backend"], a0["library_version"], a0["layout"], a0["scale"],
                          a0["mask_convention"], a0["function"]),
                         ("xformers", standin.XFORMERS_VERSION, "BSHD", 0.4, "additive",
                          "memory_efficient_attention"))
        self.assertEqual((bool(a1["causal"]), a1["causal_align"]), (True, "top_left"))
        self.assertFalse({"bias", "mask"} & set(t1))
        expected = bias[..., :5] + torch.zeros(5, 5).masked_fill(torch.ones(5, 5).triu(1) > 0,
                                                                 float("-inf"))
        self.assertTrue(torch.equal(t2["bias"], expected))
        self.assertFalse(a2["causal"])
        for run, case, offset in zip(runs, cases, (None, 0, None)):
            self.assert_recorded(run, case)
            self.assert_replays_bshd(case, causal_offset=offset)

    def test_xformers_block_diagonal_masks_are_packed_thd_cases(self):
        ops = sys.modules["xformers.ops"]

        def packed(mask_class, seed):
            def call():
                mask = mask_class.from_seqlens([3, 4, 2], [5, 4, 2])
                q, k, v = bshd(1, 9, H, seed), bshd(1, 11, H, seed + 1), bshd(1, 11, H, seed + 2)
                return (q, k, v), ops.memory_efficient_attention(q, k, v, mask)
            return call

        runs, cases, ours = self.record(packed(ops.BlockDiagonalMask, 20),
                                        packed(ops.BlockDiagonalCausalMask, 30))
        self.assertEqual(ours, [])
        for ((q, k, v), o), (t, attrs) in zip(runs, cases):
            for name, x in (("q", q), ("v", v), ("o", o), ("do", 2 * o), ("dq", q.grad),
                            ("dk", k.grad)):
                torch.testing.assert_close(t[name], x.detach()[0], rtol=0, atol=0, msg=name)
            self.assertEqual((attrs["layout"], attrs["max_seqlen_q"], attrs["max_seqlen_k"]),
                             ("THD", 4, 5))
            self.assertEqual(t["cu_seqlens_q"].tolist(), [0, 3, 7, 9])
            self.assertEqual(t["cu_seqlens_k"].tolist(), [0, 5, 9, 11])
        self.assertFalse(cases[0][1]["causal"])
        self.assertEqual((bool(cases[1][1]["causal"]), cases[1][1]["causal_align"]),
                         (True, "top_left"))

    def test_import_time_binding_is_patched_and_restored(self):
        user = importlib.import_module("flash_attn_user")  # from flash_attn import ...
        try:
            original = sys.modules["flash_attn"].flash_attn_func
            self.assertIs(user.flash_attn_func, original)
            runs, [case], _ = self.record(lambda: user.causal_attention(bshd(B, 4, H, 40),
                                                                        bshd(B, 4, H, 41),
                                                                        bshd(B, 4, H, 42)))
            self.assert_recorded(runs[0], case)
            for home in (user, sys.modules["flash_attn"],
                         sys.modules["flash_attn.flash_attn_interface"]):
                self.assertIs(home.flash_attn_func, original)
        finally:
            del sys.modules["flash_attn_user"]

    def test_calls_the_schema_cannot_express_warn_once_and_run(self):
        flash = sys.modules["flash_attn"]
        cu = torch.tensor([0, 4, 6], dtype=torch.int32)

        def windowed():
            torch.manual_seed(50)
            q, k, v = (torch.randn(6, H, D, requires_grad=True) for _ in range(3))
            return (q, k, v), flash.flash_attn_varlen_func(q, k, v, cu, cu, 4, 4,
                                                           window_size=(1, 1))

        runs, cases, ours = self.record(windowed, windowed)
        self.assertEqual(cases, [])
        self.assertIsNotNone(runs[1][0][0].grad)
        self.assertEqual(ours, ["attnscope_record: a call of flash_attn_varlen_func is not "
                                "recorded: window_size is set: packed cases have no form for it"])

    def test_cases_scan_without_error_findings(self):
        flash, ops = sys.modules["flash_attn"], sys.modules["xformers.ops"]
        cu_q = torch.tensor([0, 3, 8], dtype=torch.int32)
        cu_k = torch.tensor([0, 5, 11], dtype=torch.int32)

        def flash_func():
            q, k, v = bshd(B, 5, H, 60), bshd(B, 9, HK, 61), bshd(B, 9, HK, 62)
            return (q, k, v), flash.flash_attn_func(q, k, v, causal=True, window_size=(3, -1),
                                                    alibi_slopes=torch.tensor([.5, .3, .2, .1]))

        def flash_varlen():
            torch.manual_seed(63)
            q, k, v = (torch.randn(t, H, D, requires_grad=True) for t in (8, 11, 11))
            return (q, k, v), flash.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 5,
                                                           causal=True, softcap=4.0)

        def xformers_packed():
            mask = ops.BlockDiagonalCausalMask.from_seqlens([3, 5])
            q, k, v = bshd(1, 8, H, 64), bshd(1, 8, H, 65), bshd(1, 8, H, 66)
            return (q, k, v), ops.memory_efficient_attention(q, k, v, mask)

        def xformers_causal():
            q, k, v = bshd(B, 6, H, 67), bshd(B, 6, H, 68), bshd(B, 6, H, 69)
            return (q, k, v), ops.memory_efficient_attention(q, k, v, ops.LowerTriangularMask())

        _, cases, _ = self.record(flash_func, flash_varlen, xformers_packed, xformers_causal)
        self.assertEqual(len(cases), 4)
        self.assertEqual(scan_errors(self.path), [])


class NotImportedTest(unittest.TestCase):
    def test_a_library_the_user_did_not_import_stays_unimported(self):
        with tempfile.TemporaryDirectory() as work:
            rec = Recorder(os.path.join(work, "none.h5"))
            with rec.step(0):
                torch.nn.functional.scaled_dot_product_attention(*torch.randn(3, 1, 2, 4, 8))
        self.assertFalse({"xformers", "flash_attn"} & set(sys.modules))


if __name__ == "__main__":
    unittest.main()
