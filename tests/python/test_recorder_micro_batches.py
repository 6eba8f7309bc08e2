"""Gradient accumulation: within one rec.step, a forward call after backward delivered
gradients starts the next micro-batch. Cases go to /step_N/micro_KK/layer_MM with attributes
micro_batch, layer (call index in the micro-batch) and call_index (in the step), and hold each
micro-batch's own gradients; checkpoint recomputations start none. forward_seq / backward_seq
number the step's events in the order they ran, and `scan`'s first bad case follows that order
and names the micro-batch."""
import os
import tempfile
import unittest
import warnings

import torch
import torch.nn.functional as F

from attention_nets import Block, Net
from attnscope_record import Recorder
from attnscope_test_util import cli_json, read_case


class GradBoost(torch.autograd.Function):
    """Identity forward; the gradient times 1e4 on the way back (a loss scale gone wrong in one
    layer): fp16 overflows there, outside attention, in the backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * 1e4


class BoostedBlock(Block):
    """attention_nets' Block whose attention runs in fp16 on 10 v, its dO x 1e4 (GradBoost)."""

    def forward(self, x):
        B, S, _ = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, 2, 8).permute(2, 0, 3, 1, 4)
        o = GradBoost.apply(F.scaled_dot_product_attention(q.half(), k.half(),
                                                           (10 * v).half())).float()
        return x + self.out(o.transpose(1, 2).reshape(B, S, 16))


def micro_paths(micro_batches, layers=range(3)):
    return [f"/step_000002/micro_{m:02d}/layer_{i:02d}" for m in micro_batches for i in layers]


class MicroBatchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        torch.manual_seed(9)
        self.inputs = [torch.randn(2, 5, 16), torch.randn(3, 5, 16)]

    def tearDown(self):
        self.dir.cleanup()

    def accumulate(self, name, inputs, reentrant=None, **selection):
        """One step of forward + backward per input (gradient accumulation); (recorder, path)."""
        net = Net()
        net.reentrant = reentrant
        path = os.path.join(self.dir.name, name + ".h5")
        rec = Recorder(path, **selection)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with rec.step(2):
                for x in inputs:
                    net(x).square().sum().backward()  # parameter gradients accumulate
        return rec, path

    def test_two_micro_batches_get_their_own_groups_and_gradients(self):
        rec, path = self.accumulate("two", self.inputs)
        self.assertEqual(rec.written, micro_paths([0, 1]))
        for m, x in enumerate(self.inputs):
            alone, alone_path = self.accumulate(f"alone_{m}", [x])
            self.assertEqual(alone.written, [f"/step_000002/layer_{i:02d}" for i in range(3)])
            for i in range(3):
                t, attrs = read_case(path, f"/step_000002/micro_{m:02d}/layer_{i:02d}")
                self.assertEqual((attrs["micro_batch"], attrs["layer"], attrs["call_index"]),
                                 (m, i, 3 * m + i))
                ref, ref_attrs = read_case(alone_path, alone.written[i])
                self.assertEqual((ref_attrs["micro_batch"], ref_attrs["call_index"]), (0, i))
                self.assertEqual(sorted(t), sorted(ref))
                for key in ref:
                    self.assertTrue(torch.equal(t[key], ref[key]), (m, i, key))

    def test_layers_select_within_each_micro_batch(self):
        rec, path = self.accumulate("layer1", self.inputs, layers=[1])
        self.assertEqual(rec.written, micro_paths([0, 1], [1]))
        self.assertEqual([read_case(path, g)[1]["call_index"] for g in rec.written], [1, 4])

    def test_unselected_calls_mark_the_micro_batch_boundary(self):
        # Frozen bottom (embedding and block 0): the selected call 0 gets no gradient at all;
        # backward reaching the later, unselected calls still ends the micro-batch.
        net = Net()
        for module in (net.embed, net.blocks[0]):
            module.requires_grad_(False)
        path = os.path.join(self.dir.name, "frozen.h5")
        rec = Recorder(path, layers=[0])
        with rec.step(2):
            for x in self.inputs:
                net(x).square().sum().backward()
        self.assertEqual(rec.written, micro_paths([0, 1], [0]))
        t, attrs = read_case(path, rec.written[1])
        self.assertEqual((attrs["micro_batch"], attrs["call_index"]), (1, 3))
        self.assertEqual(sorted(t), ["k", "o", "q", "v"])

    def test_checkpoint_recomputations_start_no_micro_batch(self):
        plain, plain_path = self.accumulate("plain", self.inputs)
        for reentrant in (True, False):
            rec, path = self.accumulate(f"ckpt_{reentrant}", self.inputs, reentrant)
            self.assertEqual(rec.written, plain.written)
            for group in rec.written:
                t, ref = read_case(path, group)[0], read_case(plain_path, group)[0]
                self.assertEqual(sorted(t), sorted(ref))
                for key in ref:
                    self.assertTrue(torch.equal(t[key], ref[key]), (reentrant, group, key))

    def test_forwards_before_one_backward_are_one_micro_batch(self):
        net = Net()
        path = os.path.join(self.dir.name, "siamese.h5")
        rec = Recorder(path)
        with rec.step(2):
            (net(self.inputs[0]).sum() + net(self.inputs[1]).sum()).backward()
        self.assertEqual(rec.written, [f"/step_000002/layer_{i:02d}" for i in range(6)])

    def test_events_are_numbered_in_the_order_they_ran(self):
        rec, path = self.accumulate("events", self.inputs)
        attrs = [read_case(path, g)[1] for g in rec.written]
        forward = [a["forward_seq"] for a in attrs]
        backward = {g: a["backward_seq"] for g, a in zip(rec.written, attrs)}
        self.assertEqual(forward, sorted(forward))  # forward calls in call order
        for m in range(2):
            mine = micro_paths([m])
            # The backward reaches layer 2 first, then 1, then 0, after the micro-batch's forward
            # and before the next micro-batch's.
            self.assertLess(backward[mine[2]], backward[mine[1]])
            self.assertLess(backward[mine[1]], backward[mine[0]])
            self.assertLess(max(forward[3 * m:3 * m + 3]), backward[mine[2]])
        self.assertLess(backward[micro_paths([0])[0]], forward[3])

    def test_first_bad_is_an_earlier_micro_batch_backward(self):
        # Micro-batch 0: layer 1's dO overflows fp16 in the backward (GradBoost), layer 0 gets
        # NaN gradients through it. Micro-batch 1 then brings an inf input, bad in every layer's
        # forward. Micro-batch 0's backward ran first: it is the first bad case, named with its
        # micro-batch, and the first NaN / Inf too.
        torch.manual_seed(0)
        blocks = torch.nn.Sequential(Block(0.0), BoostedBlock(0.0), Block(0.0))
        path = os.path.join(self.dir.name, "boosted.h5")
        rec = Recorder(path)
        inputs = [torch.randn(2, 5, 16), torch.randn(2, 5, 16)]
        inputs[1][0, 0, 0] = float("inf")
        with rec.step(0):
            for x in inputs:
                blocks(x).square().sum().backward()
        doc = cli_json("scan", path, expect=1)
        first = doc["first_bad"]
        self.assertEqual(first["path"], "/step_000000/micro_00/layer_01")
        self.assertTrue(first["from_backward"])
        self.assertEqual(first["backward_into"], ["/step_000000/micro_00/layer_00"])
        self.assertTrue(first["text"].startswith("step 0, micro-batch 0, layer 1"), first["text"])
        origin = first["nonfinite_origin"]
        self.assertEqual((origin["path"], origin["side"]),
                         ("/step_000000/micro_00/layer_01", "backward"))


if __name__ == "__main__":
    unittest.main()
