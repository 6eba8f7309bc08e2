"""Dropout replay: the keep-mask of a CPU sdpa_math call with dropout_p > 0 is regenerated
from the RNG state saved before the call, written as `dropout_mask` (bool [B, H, Sq, Sk], True =
kept) with dropout_replay="mask" once it reproduces the recorded o (fp32, fp16, bf16, autocast
bf16, GQA, a bias); the training run's randomness is the same with and without the recorder;
calls whose mask cannot be regenerated say why (dropout_replay="unavailable", dropout_note);
the mask counts against the size budget."""
import os
import tempfile
import unittest

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from attnscope_record import Recorder, attention
from attnscope_test_util import read_case

P = 0.3
CASE = "/step_000000/layer_00"


def dropout_step(dtype=torch.float32, autocast=None, hk=4, bias=None, seed=7):
    """q [2, 4, 6, 16], k/v [2, hk, 6, 16]: one SDPA call with dropout_p=P and its backward,
    then 4 numbers drawn from the RNG as the rest of a training step would."""
    torch.manual_seed(seed)
    q = torch.randn(2, 4, 6, 16).to(dtype).requires_grad_(True)
    k = torch.randn(2, hk, 6, 16).to(dtype).requires_grad_(True)
    v = torch.randn(2, hk, 6, 16).to(dtype).requires_grad_(True)
    with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=P,
                                           enable_gqa=hk != 4)
    o.float().square().sum().backward()
    return o, q.grad, torch.rand(4)


class RandomDraw(TorchFunctionMode):
    """Draws a random number as SDPA is entered, between the recorder's saved RNG state and
    the kernel's dropout (as a noise-injecting or sampling function mode would)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch._C._nn.scaled_dot_product_attention:
            torch.rand(1)
        return func(*args, **(kwargs or {}))


class DropoutReplayTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "dump.h5")

    def tearDown(self):
        self.dir.cleanup()

    def check_replayed(self, **kwargs):
        rec = Recorder(self.path)
        with rec.step(0):
            o, dq, inside = dropout_step(**kwargs)
        after = torch.rand(4)  # drawn after the recorder regenerated the mask
        ref_o, ref_dq, ref_inside = dropout_step(**kwargs)
        ref_after = torch.rand(4)
        # The step's results and the randomness during and after it are an unrecorded run's.
        self.assertTrue(torch.equal(o, ref_o) and torch.equal(dq, ref_dq))
        self.assertTrue(torch.equal(inside, ref_inside) and torch.equal(after, ref_after))
        t, attrs = read_case(self.path, CASE)
        self.assertEqual((attrs["backend"], attrs["dropout_p"], attrs["dropout_replay"]),
                         ("sdpa_math", P, "mask"))
        self.assertNotIn("dropout_note", attrs)
        keep = t["dropout_mask"]
        self.assertEqual((keep.dtype, tuple(keep.shape)), (torch.bool, (2, 4, 6, 6)))
        self.assertAlmostEqual(float(keep.float().mean()), 1 - P, delta=0.1)
        # The stored mask reproduces the recorded output through the math kernel (the
        # recomputation masks then scales: rounding differences only).
        autocast = kwargs.get("autocast")
        cast = [x.to(autocast) if autocast else x for x in (t["q"], t["k"], t["v"])]
        again = torch.ops.aten._scaled_dot_product_attention_math(
            *cast, t.get("bias"), P, False, dropout_mask=keep,
            enable_gqa=kwargs.get("hk", 4) != 4)[0]
        self.assertEqual(again.dtype, t["o"].dtype)
        eps = torch.finfo(t["o"].dtype).eps
        torch.testing.assert_close(again, t["o"], rtol=0, atol=max(4 * eps, 1e-5))
        # A mask drawn from another state does not.
        wrong = torch.ops.aten._scaled_dot_product_attention_math(
            *cast, t.get("bias"), P, False, dropout_mask=keep.roll(1, -1),
            enable_gqa=kwargs.get("hk", 4) != 4)[0]
        self.assertGreater(float((wrong.double() - t["o"].double()).abs().max()), 0.05)
        return attrs

    def test_float32_mask_reproduces_the_output(self):
        self.assertEqual(self.check_replayed()["dtype"], "float32")

    def test_float16_mask_reproduces_the_output(self):
        self.assertEqual(self.check_replayed(dtype=torch.float16)["dtype"], "float16")

    def test_bfloat16_mask_reproduces_the_output(self):
        self.assertEqual(self.check_replayed(dtype=torch.bfloat16)["dtype"], "bfloat16")

    def test_autocast_bfloat16_mask_reproduces_the_output(self):
        attrs = self.check_replayed(autocast=torch.bfloat16)
        self.assertEqual((attrs["dtype"], attrs["autocast_dtype"]), ("bfloat16", "bfloat16"))

    def test_gqa_and_bias_mask_reproduces_the_output(self):
        bias = torch.zeros(6, 6).masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), -1e4)
        self.check_replayed(hk=2, bias=bias)

    def test_each_call_gets_its_own_mask(self):
        rec = Recorder(self.path)
        with rec.step(0):
            torch.manual_seed(1)
            q = torch.randn(1, 2, 8, 8, requires_grad=True)
            (F.scaled_dot_product_attention(q, q, q, dropout_p=P)
             + F.scaled_dot_product_attention(q, q, q, dropout_p=P)).sum().backward()
        first, second = (read_case(self.path, g)[0] for g in rec.written)
        self.assertFalse(torch.equal(first["dropout_mask"], second["dropout_mask"]))
        self.assertFalse(torch.equal(first["o"], second["o"]))

    def test_rng_drawn_inside_the_call_makes_replay_unavailable(self):
        rec = Recorder(self.path)
        with rec.step(0), RandomDraw():
            o, _, _ = dropout_step()
        after = torch.rand(4)
        with RandomDraw():
            ref_o, _, _ = dropout_step()
        self.assertTrue(torch.equal(o, ref_o) and torch.equal(after, torch.rand(4)))
        t, attrs = read_case(self.path, CASE)
        self.assertEqual(attrs["dropout_replay"], "unavailable")
        self.assertRegex(attrs["dropout_note"], r"^the regenerated mask does not reproduce the "
                         r"recorded output \(\d+ of 768 elements differ")
        self.assertNotIn("dropout_mask", t)
        self.assertEqual(sorted(t), ["dk", "do", "dq", "dv", "k", "o", "q", "v"])

    def test_custom_function_dropout_is_unavailable(self):
        @attention
        def dropout_attention(q, k, v, dropout_p=0.0):
            p = torch.softmax(q @ k.transpose(-2, -1), -1)
            return F.dropout(p, dropout_p) @ v

        rec = Recorder(self.path)
        torch.manual_seed(0)
        q = torch.randn(1, 2, 5, 8, requires_grad=True)
        with rec.step(0):
            dropout_attention(q, q, q, dropout_p=0.5).sum().backward()
        t, attrs = read_case(self.path, CASE)
        self.assertEqual((attrs["backend"], attrs["dropout_p"], attrs["dropout_replay"]),
                         ("custom", 0.5, "unavailable"))
        self.assertIn("custom attention function", attrs["dropout_note"])
        self.assertNotIn("dropout_mask", t)

    def test_mask_counts_against_the_budget(self):
        # q, k, v, o, do, dq, dk, dv [1, 1, 256, 8] fp32: 8 KiB each, 4 KiB headers per dataset
        # and group: 100 KiB; the mask [1, 1, 256, 256] adds 68 KiB.
        torch.manual_seed(0)
        x = torch.randn(1, 1, 256, 8, requires_grad=True)
        rec = Recorder(self.path, budget_mb=200 / 1024)
        with rec.step(0):
            F.scaled_dot_product_attention(x, x, x, dropout_p=P).sum().backward()
        self.assertEqual(rec.written, [CASE])
        rec = Recorder(self.path, budget_mb=140 / 1024)
        with self.assertWarnsRegex(RuntimeWarning, "size budget of 0.1 MiB .* reached: case "
                                   "/step_000000/layer_00 needs 0.16 MiB"):
            with rec.step(0):
                F.scaled_dot_product_attention(x, x, x, dropout_p=P).sum().backward()
        self.assertEqual(rec.written, [])
        rec = Recorder(self.path, budget_mb=140 / 1024)  # without dropout the call fits
        with rec.step(0):
            F.scaled_dot_product_attention(x, x, x).sum().backward()
        self.assertEqual(rec.written, [CASE])

if __name__ == "__main__":
    unittest.main()
