"""Recorder selection: steps, call index (layer), module names, predicates (deferred until
backward), the step forms (context, decorator, next_step), registered attention functions,
and the hot path when nothing is selected."""
import os
import tempfile
import unittest
import warnings

import h5py
import torch
import torch.nn.functional as F

from attnscope_record import Recorder, attention
from attnscope_test_util import read_case


class Attn(torch.nn.Module):
    """x [B, H, S, D] -> SDPA(x W, x, x): one attention call per forward."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.eye(8) * scale)

    def forward(self, x):
        return F.scaled_dot_product_attention(x @ self.w, x, x)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(Attn(), torch.nn.Sequential(Attn(), Attn()))


def train_step(model, seed=1):
    torch.manual_seed(seed)
    x = torch.randn(2, 3, 5, 8)
    loss = model(x).square().sum()
    loss.backward()
    return loss


def groups(path):
    if not os.path.exists(path):
        return []
    with h5py.File(path, "r") as f:
        out = []
        f.visititems(lambda n, o: out.append("/" + n) if "q" in getattr(o, "keys", lambda: [])()
                     else None)
        return out


class SelectionTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "dump.h5")

    def tearDown(self):
        self.dir.cleanup()

    def record(self, run_steps=range(4), **kwargs):
        model = make_model()
        rec = Recorder(self.path, **kwargs)
        for s in run_steps:
            with rec.step(s):
                train_step(model, s)
        return rec

    def test_steps_select_whole_steps(self):
        rec = self.record(steps=[1, 2])
        self.assertEqual(rec.written, ["/step_000001/layer_00", "/step_000001/layer_01",
                                       "/step_000001/layer_02", "/step_000002/layer_00",
                                       "/step_000002/layer_01", "/step_000002/layer_02"])
        self.assertEqual(groups(self.path), rec.written)

    def test_layers_and_callable_steps(self):
        rec = self.record(steps=lambda s: s % 2 == 1, layers=[0, 2])
        self.assertEqual(rec.written, ["/step_000001/layer_00", "/step_000001/layer_02",
                                       "/step_000003/layer_00", "/step_000003/layer_02"])

    def test_module_names_label_and_select_calls(self):
        model = make_model()
        rec = Recorder(self.path, names="1.*", model=model)
        with rec.step(7):
            train_step(model)
        self.assertEqual(rec.written, ["/step_000007/layer_01", "/step_000007/layer_02"])
        with h5py.File(self.path, "r") as f:
            self.assertEqual([f[g].attrs["name"] for g in rec.written], ["1.0", "1.1"])
            self.assertEqual(f[rec.written[0]].attrs["step"], 7)
            self.assertEqual(f[rec.written[1]].attrs["layer"], 2)

    def test_gradients_are_exactly_this_calls_gradients(self):
        model = make_model()
        rec = Recorder(self.path, layers=[1])
        torch.manual_seed(3)
        x = torch.randn(2, 3, 5, 8)
        with rec.step(0):
            h0 = model[0](x)
            h1 = model[1][0](h0)
            out = model[1][1](h1) + h1  # h1 also used outside the attention
            out.square().sum().backward()
        t, _ = read_case(self.path, "/step_000000/layer_01")
        q = (t["q"].clone().requires_grad_(True), t["k"].clone().requires_grad_(True),
             t["v"].clone().requires_grad_(True))
        o = F.scaled_dot_product_attention(*q)
        torch.testing.assert_close(t["o"], o.detach(), rtol=0, atol=0)
        grads = torch.autograd.grad(o, q, t["do"])
        for name, g in zip(("dq", "dk", "dv"), grads):
            torch.testing.assert_close(t[name], g, rtol=0, atol=0)
        # dO is the upstream gradient of h1 through the rest of the model, not d(h1) itself.
        self.assertGreater(float((t["do"] - 2 * h1.detach()).abs().max()), 1e-3)

    def test_nonfinite_predicate_waits_for_backward(self):
        # Step 2 has a finite output but an infinite upstream gradient in layer 2 only (and
        # NaN-free inputs); layers 0-1 receive non-finite gradients through it.
        model = make_model()
        rec = Recorder(self.path, when="nonfinite")
        for s in range(4):
            with rec.step(s):
                torch.manual_seed(s)
                out = model(torch.randn(2, 3, 5, 8))
                weight = torch.ones_like(out)
                if s == 2:
                    weight[0, 1, 3, 4] = float("inf")
                (out * weight).sum().backward()
        self.assertEqual(rec.written, ["/step_000002/layer_00", "/step_000002/layer_01",
                                       "/step_000002/layer_02"])
        t, _ = read_case(self.path, "/step_000002/layer_02")
        self.assertTrue(bool(torch.isfinite(t["o"]).all()))
        self.assertEqual(float(t["do"][0, 1, 3, 4]), float("inf"))
        self.assertFalse(bool(torch.isfinite(t["dq"]).all()))

    def test_backward_outside_the_step_warns_once_and_keeps_the_forward(self):
        model = make_model()
        rec = Recorder(self.path, layers=[0])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for s in range(2):
                with rec.step(s):
                    out = model(torch.randn(2, 3, 5, 8))
                out.sum().backward()
        self.assertEqual(len(caught), 1)
        self.assertRegex(str(caught[0].message), "step 0 ended before backward reached its "
                         "attention calls.*hint: run loss.backward")
        self.assertEqual(rec.written, ["/step_000000/layer_00", "/step_000001/layer_00"])
        t, _ = read_case(self.path, rec.written[1])
        self.assertEqual(sorted(t), ["k", "o", "q", "v"])

    def test_custom_predicate_sees_tensors(self):
        rec = self.record(run_steps=range(3),
                          when=lambda call: call.info.layer == 1 and "dv" in call.tensors)
        self.assertEqual(rec.written, [f"/step_00000{s}/layer_01" for s in range(3)])

    def test_decorator_and_next_step(self):
        model = make_model()
        rec = Recorder(self.path, steps=[1], layers=[0])
        step = rec(lambda: train_step(model))
        for _ in range(3):
            step()
        self.assertEqual(rec.written, ["/step_000001/layer_00"])
        path2 = os.path.join(self.dir.name, "second.h5")
        rec2 = Recorder(path2, steps=[5], layers=[2])
        with rec2:
            rec2.next_step(4)
            train_step(model)
            rec2.next_step()
            train_step(model)
        self.assertEqual(rec2.written, ["/step_000005/layer_02"])
        self.assertIs(F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)

    def test_registered_function_recorded_with_its_names(self):
        seen = []

        @attention
        def my_attention(q, k, v, mask=None, causal=False, softmax_scale=None):
            seen.append(q)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                                  scale=softmax_scale)

        q = torch.randn(1, 2, 4, 8, requires_grad=True)
        rec = Recorder(self.path, steps=[1])
        for s in range(2):
            with rec.step(s):
                my_attention(q, q, q, causal=True, softmax_scale=0.5).sum().backward()
        # Step 0 is not selected: the function got the caller's tensor itself (hot path).
        self.assertIs(seen[0], q)
        self.assertIsNot(seen[1], q)
        self.assertEqual(rec.written, ["/step_000001/layer_00"])
        t, attrs = read_case(self.path, rec.written[0])
        self.assertEqual(attrs["function"], "SelectionTest.test_registered_function_recorded_"
                         "with_its_names.<locals>.my_attention")
        self.assertEqual((attrs["scale"], bool(attrs["causal"]), attrs["causal_align"]),
                         (0.5, True, "top_left"))
        self.assertEqual(sorted(t), ["dk", "do", "dq", "dv", "k", "o", "q", "v"])

    def test_nothing_selected_leaves_sdpa_untouched_and_writes_nothing(self):
        model = make_model()
        rec = Recorder(self.path, steps=[100])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with rec.step(0):
                loss = train_step(model)
        self.assertEqual(rec.written, [])
        self.assertFalse(os.path.exists(self.path))
        self.assertEqual(rec._pending, [])
        torch.testing.assert_close(loss, train_step(make_model()), rtol=0, atol=0)


if __name__ == "__main__":
    unittest.main()
