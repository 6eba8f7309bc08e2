"""Gradient accumulation: within one rec.step, a forward call after backward delivered
gradients starts the next micro-batch. Cases go to /step_N/micro_KK/layer_MM with attributes
micro_batch, layer (call index in the micro-batch) and call_index (in the step), and hold each
micro-batch's own gradients; checkpoint recomputations start none."""
import os
import tempfile
import unittest
import warnings

import torch

from attention_nets import Net
from attnscope_record import Recorder
from attnscope_test_util import read_case


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


if __name__ == "__main__":
    unittest.main()
