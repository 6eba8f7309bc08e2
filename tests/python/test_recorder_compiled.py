"""torch.compile: the SDPA calls of a compiled model are recorded through attnscope's custom ops
(compiled.py) with the q, k, v, o, do, dq, dk, dv of the same step run eagerly: Inductor with
fullgraph=True on CPU (its first compile of these tiny shapes takes seconds); an @attention
function under aot_eager (no C++ build needed for it). Calls the ops cannot take (FlexAttention,
an attn_mask that requires grad) run as compiled, unrecorded, and warn once naming the call.
As in eager mode, SDPA inside an @attention function is part of the function's call."""
import os
import tempfile
import unittest
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

from attnscope_record import Recorder, attention
from attnscope_test_util import read_case

TENSORS = ("q", "k", "v", "o", "do", "dq", "dk", "dv")


class Net(torch.nn.Module):
    """x [2, 6, 16] -> two SDPA layers of 2 heads of 8: causal, then with a bool padding mask."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(16, 48) for _ in range(2))
        self.keep = torch.ones(2, 1, 1, 6, dtype=torch.bool)
        self.keep[1, ..., 4:] = False

    def forward(self, x):
        for i, qkv in enumerate(self.qkv):
            q, k, v = qkv(x).view(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=i == 0,
                                               attn_mask=self.keep if i == 1 else None)
            x = x + o.transpose(1, 2).reshape(2, 6, 16)
        return x


class CompiledTest(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()
        self.dir = tempfile.TemporaryDirectory()
        torch.manual_seed(1)
        self.x = torch.randn(2, 6, 16)

    def tearDown(self):
        self.dir.cleanup()

    def record(self, name, run, steps=1):
        """(recorder, attnscope warnings) of `steps` steps each calling run()."""
        rec = Recorder(os.path.join(self.dir.name, name + ".h5"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step in range(steps):
                with rec.step(step):
                    run()
        return rec, [str(c.message) for c in caught if "attnscope_record" in str(c.message)]

    def assert_same_cases(self, eager, compiled):
        self.assertEqual(compiled.written, eager.written)
        for group in eager.written:
            t_eager, a_eager = read_case(eager.path, group)
            t_compiled, a_compiled = read_case(compiled.path, group)
            self.assertEqual(sorted(t_compiled), sorted(t_eager), group)
            for name in TENSORS:
                torch.testing.assert_close(t_compiled[name], t_eager[name], msg=group + name)
            self.assertTrue(a_compiled["compiled"])
            for key in ("backend", "scale", "causal", "function", "layer", "mask_convention"):
                self.assertEqual(a_compiled.get(key), a_eager.get(key), group + key)

    def test_inductor_fullgraph_step_records_the_eager_step(self):
        model = Net()

        def step(net):
            def run():
                net(self.x).square().sum().backward()
            return run

        eager, ours = self.record("eager", step(model))
        self.assertEqual((eager.written, ours), (["/step_000000/layer_00",
                                                  "/step_000000/layer_01"], []))
        eager_grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        compiled_model = torch.compile(model, backend="inductor", fullgraph=True)
        compiled, ours = self.record("compiled", step(compiled_model), steps=2)
        self.assertEqual(ours, [])
        self.assertEqual(compiled.written, eager.written + ["/step_000001/layer_00",
                                                            "/step_000001/layer_01"])
        compiled.written = compiled.written[:2]
        self.assert_same_cases(eager, compiled)
        # The step's own results are those of the compiled model without the recorder.
        for p, g in zip(model.parameters(), eager_grads):
            torch.testing.assert_close(p.grad, 2 * g)

    def test_registered_function_under_aot_eager(self):
        @attention
        def softmax_attention(q, k, v, scale=None):  # SDPA inside is part of this call
            o = F.scaled_dot_product_attention(q, k, v, scale=scale)
            return torch.softmax(q @ k.transpose(-2, -1) * scale, -1) @ v + o

        w = torch.nn.Parameter(torch.randn(16, 48))

        def forward():
            q, k, v = (self.x @ w).view(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
            return softmax_attention(q, k, v, scale=0.5)

        compiled_forward = torch.compile(forward, backend="aot_eager", fullgraph=True)
        eager, _ = self.record("eager", lambda: forward().square().sum().backward())
        compiled, ours = self.record("compiled",
                                     lambda: compiled_forward().square().sum().backward())
        self.assertEqual(ours, [])
        self.assert_same_cases(eager, compiled)
        self.assertEqual(read_case(compiled.path, compiled.written[0])[1]["backend"], "custom")

    def test_flex_attention_under_compile_warns_once_and_runs(self):
        torch.manual_seed(2)
        q, k, v = (torch.randn(1, 2, 8, 4) for _ in range(3))

        def doubled(score, b, h, q_idx, kv_idx):
            return score * 2

        compiled = torch.compile(lambda: flex_attention(q, k, v, score_mod=doubled),
                                 backend="aot_eager", fullgraph=True)
        outs = []
        rec, ours = self.record("flex", lambda: outs.append(compiled()), steps=2)
        self.assertEqual(rec.written, [])
        self.assertEqual(ours, ["attnscope_record: flex_attention called under torch.compile is "
                                "not recorded: FlexAttention compiles into its own fused kernel; "
                                "call it outside the compiled region to record it"])
        for o in outs:
            torch.testing.assert_close(o, flex_attention(q, k, v, score_mod=doubled))

    def test_mask_requiring_grad_warns_once_and_runs_in_fullgraph(self):
        bias = torch.nn.Parameter(torch.zeros(6, 6))
        torch.manual_seed(3)
        q, k, v = (torch.randn(1, 2, 6, 8) for _ in range(3))

        def forward():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

        compiled_forward = torch.compile(forward, backend="aot_eager", fullgraph=True)
        rec, ours = self.record("mask", lambda: compiled_forward().square().sum().backward(),
                                steps=2)
        self.assertEqual(rec.written, [])
        self.assertEqual(ours, ["attnscope_record: scaled_dot_product_attention called under "
                                "torch.compile is not recorded: its attn_mask requires grad"])
        compiled_grad = bias.grad.clone()
        bias.grad = None
        forward().square().sum().backward()
        torch.testing.assert_close(compiled_grad, 2 * bias.grad)


if __name__ == "__main__":
    unittest.main()
