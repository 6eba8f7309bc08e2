"""Gradient checkpointing: the forward that torch.utils.checkpoint recomputes during backward
(use_reentrant=True and False, directly and through transformers' activation checkpointing) is
matched to its original call, which gets exactly the do, dq, dk, dv of a run without
checkpointing; no extra cases, no warning, dropout replay still verified."""
import os
import tempfile
import unittest
import warnings

import h5py
import torch
import transformers

from attention_nets import Net
from attnscope_record import Recorder
from attnscope_test_util import read_case

GRADIENTS = ("do", "dq", "dk", "dv")


def tiny_bert():
    config = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     max_position_embeddings=16)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return transformers.BertModel(config).train()


class CheckpointingTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def record(self, name, model, step_fn):
        """(paths written, {path: tensors}, attnscope warnings) of one recorded step."""
        path = os.path.join(self.dir.name, name + ".h5")
        rec = Recorder(path, model=model)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with rec.step(0):
                step_fn()
        ours = [str(c.message) for c in caught if "attnscope_record" in str(c.message)]
        model.zero_grad()
        with h5py.File(path, "r") as f:
            names = {g: f[g].attrs["name"] for g in rec.written}
        return rec.written, {g: read_case(path, g) for g in rec.written}, names, ours

    def check_same_as_unchecked(self, model, step_fn, set_checkpointing, expected_cases):
        set_checkpointing(None)
        plain, plain_cases, plain_names, _ = self.record("plain", model, step_fn)
        self.assertEqual(plain, expected_cases)
        for reentrant in (True, False):
            with self.subTest(use_reentrant=reentrant):
                set_checkpointing(reentrant)
                written, cases, names, ours = self.record(f"ckpt_{reentrant}", model, step_fn)
                self.assertEqual(written, plain)
                self.assertEqual(names, plain_names)
                self.assertEqual(ours, [])
                for group in written:
                    (t, attrs), (ref, ref_attrs) = cases[group], plain_cases[group]
                    self.assertEqual(sorted(t), sorted(ref), group)
                    for key in GRADIENTS:
                        self.assertIn(key, t, group)
                    for key, x in ref.items():
                        self.assertTrue(torch.equal(t[key], x), f"{group} {key}")
                    self.assertEqual(attrs["layer"], ref_attrs["layer"])
        return plain_cases

    def test_torch_checkpoint_both_ways_gives_the_unchecked_gradients(self):
        net = Net()
        x = torch.randn(2, 5, 16)

        def set_checkpointing(reentrant):
            net.reentrant = reentrant

        self.check_same_as_unchecked(net, lambda: net(x).square().sum().backward(),
                                     set_checkpointing,
                                     [f"/step_000000/layer_{i:02d}" for i in range(3)])

    def test_checkpointed_dropout_is_replayed(self):
        net = Net(dropout_p=0.25)
        x = torch.randn(2, 5, 16)

        def step():
            torch.manual_seed(3)
            net(x).square().sum().backward()

        def set_checkpointing(reentrant):
            net.reentrant = reentrant

        cases = self.check_same_as_unchecked(net, step, set_checkpointing,
                                             [f"/step_000000/layer_{i:02d}" for i in range(3)])
        for t, attrs in cases.values():
            self.assertEqual(attrs["dropout_replay"], "mask")
            self.assertEqual(tuple(t["dropout_mask"].shape), (2, 2, 5, 5))

    def test_transformers_activation_checkpointing_both_ways(self):
        model = tiny_bert()
        torch.manual_seed(1)
        ids = torch.randint(0, 50, (2, 7))
        valid = torch.ones(2, 7, dtype=torch.long)
        valid[1, 5:] = 0

        def set_checkpointing(reentrant):
            if reentrant is None:
                model.activation_checkpointing_disable()
            else:
                model.activation_checkpointing_enable(
                    activation_checkpointing_kwargs={"use_reentrant": reentrant})

        def step():
            out = model(input_ids=ids, attention_mask=valid).last_hidden_state
            out.square().sum().backward()

        cases = self.check_same_as_unchecked(model, step, set_checkpointing,
                                             ["/step_000000/layer_00", "/step_000000/layer_01"])
        t, attrs = cases["/step_000000/layer_01"]
        self.assertEqual((attrs["name"], attrs["mask_convention"]),
                         ("encoder.layer.1.attention.self", "attend"))


if __name__ == "__main__":
    unittest.main()
