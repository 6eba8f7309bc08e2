"""FlexAttention recorded for real on CPU, through the name this module binds at import time (as
users do): q, k, v, o, do, dq, dk, dv like SDPA calls; the block_mask as the bool `mask` of its
mask_mod on the full grid; the score_mod as source text and, when replayable, as `bias` and
`softcap` (ALiBi, causal -inf, tanh softcap, softcap + ALiBi), checked by recomputing the
recorded output from them; non-replayable score_mods marked "unavailable" with one warning;
replayable cases scan without error findings.

torch refuses backward on CPU at flex_attention's entry (_validate_device), although its eager
dense backward runs there: the gradient tests lift that one check."""
import contextlib
import math
import os
import tempfile
import unittest
import warnings
from unittest import mock

import h5py
import torch
import torch.nn.attention.flex_attention as flex_module
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import attnscope_record
from attnscope_record import Recorder
from attnscope_test_util import attention_math, read_case, scan_errors

B, H, S, D = 2, 4, 12, 8
SLOPES = torch.tensor([0.5, 0.25, 0.125, 0.0625])
CAP = 20.0
I, J = torch.arange(S)[:, None], torch.arange(S)[None, :]
ALIBI = (SLOPES[:, None, None] * (J - I))[None]  # [1, H, S, S]


def alibi(score, b, h, q_idx, kv_idx):
    return score + SLOPES[h] * (kv_idx - q_idx)


def tanh_softcap(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


def softcap_alibi(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP) + SLOPES[h] * (kv_idx - q_idx)


def causal_score(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, -float("inf"))


def doubled(score, b, h, q_idx, kv_idx):
    return score * 2


def squared(score, b, h, q_idx, kv_idx):
    return score ** 2


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@contextlib.contextmanager
def cpu_backward():
    with mock.patch.object(flex_module, "_validate_device", lambda query, key, value: None):
        yield


def qkv(hk=H, requires_grad=True):
    """q [B, H, S, D], k, v [B, hk, S, D]; a second call gets fresh tensors (own gradients)."""
    torch.manual_seed(3)
    shapes = ((B, H, S, D), (B, hk, S, D), (B, hk, S, D))
    return [torch.randn(*s, requires_grad=requires_grad) for s in shapes]


class FlexTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "flex.h5")
        self.block_mask = create_block_mask(causal, None, None, S, S, device="cpu")

    def tearDown(self):
        self.dir.cleanup()

    def record(self, calls, attention=None):
        """Records one step running flex_attention(q, k, v, **kwargs) for each kwargs of
        `calls`, backward through o.square().sum(); returns ([(q, k, v, o)], written cases,
        attnscope warnings)."""
        rec = Recorder(self.path)
        runs = []
        with warnings.catch_warnings(record=True) as caught, cpu_backward():
            warnings.simplefilter("always")
            with rec.step(0):
                for kwargs in calls:
                    q, k, v = qkv()
                    o = (attention or flex_attention)(q, k, v, **kwargs)
                    o.square().sum().backward()
                    runs.append((q, k, v, o))
        ours = [str(c.message) for c in caught if "attnscope_record" in str(c.message)]
        return runs, [read_case(self.path, g) for g in rec.written], ours

    def assert_replays(self, run, case, softcap=0.0):
        """The recorded tensors are the call's, and attnscope's computation (scale, softcap,
        + bias, mask) from the recorded datasets gives its output and gradients."""
        q, k, v, o = run
        t, attrs = case
        for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("do", 2 * o), ("dq", q.grad),
                        ("dk", k.grad), ("dv", v.grad)):
            torch.testing.assert_close(t[name], x.detach(), rtol=0, atol=0, msg=name)
        ref = attention_math(t["q"], t["k"], t["v"], t["do"], attrs["scale"], t.get("mask"),
                             t.get("bias"), softcap=softcap)
        for name in ("o", "dq", "dk", "dv"):
            torch.testing.assert_close(t[name].double(), ref[name], rtol=1e-5, atol=1e-5,
                                       msg=name)

    def test_causal_block_mask_and_alibi_score_mod(self):
        runs, [case], ours = self.record([dict(score_mod=alibi, block_mask=self.block_mask)])
        self.assertEqual(ours, [])
        t, attrs = case
        self.assertEqual(sorted(t), ["bias", "dk", "do", "dq", "dv", "k", "mask", "o", "q", "v"])
        self.assertEqual((attrs["backend"], attrs["layout"], attrs["function"],
                          attrs["library_version"], attrs["torch_version"]),
                         ("flex", "BHSD", "flex_attention", torch.__version__, torch.__version__))
        self.assertEqual((attrs["score_mod_replay"], attrs["mask_convention"], attrs["scale"]),
                         ("bias", "attend", 1 / math.sqrt(D)))
        self.assertFalse(attrs["causal"] or attrs["enable_gqa"])
        self.assertTrue(attrs["score_mod"].startswith("def alibi(score, b, h, q_idx, kv_idx):"))
        self.assertNotIn("score_mod_note", attrs)
        # The mask_mod on the full grid, broadcast over batch and heads; the bias per head.
        self.assertTrue(torch.equal(t["mask"], (I >= J)[None, None]))
        self.assertEqual((t["bias"].dtype, tuple(t["bias"].shape)), (torch.float32, (1, H, S, S)))
        torch.testing.assert_close(t["bias"], ALIBI, rtol=0, atol=0)
        self.assert_replays(runs[0], case)

    def test_softcap_and_causal_score_mods_are_replayed(self):
        runs, cases, ours = self.record([dict(score_mod=tanh_softcap),
                                         dict(score_mod=softcap_alibi),
                                         dict(score_mod=causal_score)])
        self.assertEqual(ours, [])
        (t0, a0), (t1, a1), (t2, a2) = cases
        self.assertEqual((a0["score_mod_replay"], a0["softcap"]), ("softcap", CAP))
        self.assertNotIn("bias", t0)
        self.assertEqual((a1["score_mod_replay"], a1["softcap"]), ("softcap+bias", CAP))
        torch.testing.assert_close(t1["bias"], ALIBI, rtol=0, atol=1e-6)
        # A causal -inf written by the score_mod is part of the bias.
        self.assertEqual(a2["score_mod_replay"], "bias")
        self.assertNotIn("softcap", a2)
        expected = torch.zeros(S, S).masked_fill(I < J, float("-inf"))[None, None]
        self.assertTrue(torch.equal(t2["bias"], expected))
        for run, case, cap in zip(runs, cases, (CAP, CAP, 0.0)):
            self.assert_replays(run, case, softcap=cap)

    def test_unreplayable_score_mods_are_marked_and_warn_once(self):
        _, cases, ours = self.record([dict(score_mod=doubled), dict(score_mod=squared)])
        for (t, attrs), name in zip(cases, ("doubled", "squared")):
            self.assertEqual(attrs["score_mod_replay"], "unavailable", name)
            self.assertEqual(attrs["score_mod_note"], "score_mod(s) - s depends on s and is "
                             "not cap * tanh(s / cap) + bias")
            self.assertTrue(attrs["score_mod"].startswith(f"def {name}("))
            self.assertFalse({"bias", "mask"} & set(t) or "softcap" in attrs, name)
            self.assertIn("dq", t)
        self.assertEqual(len(ours), 1, ours)
        self.assertRegex(ours[0], r"^attnscope_record: flex_attention: score_mod doubled cannot "
                         r"be replayed: .* \(recorded with score_mod_replay=\"unavailable\"\)$")

    def test_gqa_forward_only_without_score_mod(self):
        q, k, v = qkv(hk=2, requires_grad=False)
        rec = Recorder(self.path)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", module="attnscope_record")
            with rec.step(0):
                o = flex_attention(q, k, v, enable_gqa=True, scale=0.5)
        t, attrs = read_case(self.path, rec.written[0])
        self.assertEqual(sorted(t), ["k", "o", "q", "v"])
        self.assertEqual(tuple(t["k"].shape), (B, 2, S, D))
        self.assertTrue(torch.equal(t["o"], o))
        self.assertEqual((attrs["score_mod_replay"], bool(attrs["enable_gqa"]), attrs["scale"]),
                         ("none", True, 0.5))
        self.assertNotIn("score_mod", attrs)

    def test_references_kept_elsewhere_need_the_explicit_wrapper(self):
        kept = {"torch": flex_module.flex_attention, "ours": attnscope_record.flex_attention}
        _, cases, _ = self.record([dict(score_mod=alibi)], attention=kept["torch"])
        self.assertEqual(cases, [])
        runs, [case], _ = self.record([dict(score_mod=alibi)], attention=kept["ours"])
        self.assert_replays(runs[0], case)
        # Outside a step every binding is torch's function again; the wrapper calls it.
        self.assertIs(flex_module.flex_attention, kept["torch"])
        self.assertIs(flex_attention, kept["torch"])
        self.assertIs(attnscope_record.flex_attention.__attnscope_original__, kept["torch"])

    def test_replayable_cases_scan_without_error_findings(self):
        self.record([dict(score_mod=alibi, block_mask=self.block_mask),
                     dict(score_mod=tanh_softcap, block_mask=self.block_mask),
                     dict(score_mod=softcap_alibi), dict(score_mod=causal_score),
                     dict(block_mask=self.block_mask)])
        with h5py.File(self.path, "r") as f:
            self.assertEqual(len(f["step_000000"]), 5)
        self.assertEqual(scan_errors(self.path), [])


if __name__ == "__main__":
    unittest.main()
