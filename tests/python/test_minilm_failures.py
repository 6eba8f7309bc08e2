"""Real failures induced on the pretrained MiniLM (transformers' BertModel) in fp16 with the
hand-written eager attention that minilm_model registers with transformers, recorded only where
an output or a gradient is non-finite, then diagnosed by `attnscope-cli scan`: layer-2
activations scaled 100x overflow q k^T (score_overflow in layer 2, NaN flowing forward into
layers 3-5 and back into layers 0-1), and a -1e9 query x key padding fill (mask_fill_overflow +
fully_masked_row on exactly the padded query rows). test_recorder_wrote_eager_semantics and the
recorded-tensor checks of test_failures_are_real_in_pytorch are independent of scan's output;
the test_scan_* tests and the case list in test_failures_are_real_in_pytorch depend on it.
"""
import os
import tempfile
import unittest

import torch

import minilm_dump
from attnscope_test_util import cli_json, read_case

LAYERS = [f"/step_000000/layer_{i:02d}" for i in range(6)]


def kinds(case, severity="error"):
    return {(f["kind"], f["tensor"]) for f in case["findings"] if f["severity"] == severity}


class MiniLMFailuresTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.dumps, cls.scans, cls.losses = {}, {}, {}
        for mode in ("overflow", "padding"):
            path = os.path.join(cls.dir.name, f"{mode}.h5")
            rec, model, loss = minilm_dump.run(path, mode, "fp16")
            assert rec.stopped is None, rec.stopped
            cls.dumps[mode], cls.losses[mode] = path, loss
            cls.scans[mode] = {c["path"]: c for c in
                               cli_json("scan", path, "--threads", "2", expect=1)["cases"]}
        cls.valid_lengths = model.tokenize(
            minilm_dump.ANCHORS + minilm_dump.POSITIVES)[1].sum(1).tolist()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_failures_are_real_in_pytorch(self):
        for mode in ("overflow", "padding"):
            self.assertTrue(torch.isnan(self.losses[mode]), mode)
            self.assertEqual(list(self.scans[mode]), LAYERS, mode)
        # The overflow starts in layer 2's output; layers 0-1 only get NaN gradients.
        for layer, group in enumerate(LAYERS):
            t, attrs = read_case(self.dumps["overflow"], group)
            self.assertEqual((attrs["dtype"], attrs["function"]),
                             ("float16", "eager_attention"))
            self.assertEqual(bool(torch.isfinite(t["o"]).all()), layer < 2, group)
            self.assertFalse(bool(torch.isfinite(t["dq"]).all()), group)

    def test_recorder_wrote_eager_semantics(self):
        valid = torch.tensor(self.valid_lengths)[:, None] > torch.arange(14)
        key_bias = torch.zeros(8, 1, 1, 14).masked_fill(~valid[:, None, None, :], -10000.0)
        both = valid[:, None, :, None] & valid[:, None, None, :]
        pair_fill = torch.zeros(8, 1, 14, 14).masked_fill(~both, -1e9)
        for mode, bias in (("overflow", key_bias), ("padding", pair_fill)):
            for i, group in enumerate(LAYERS):
                t, attrs = read_case(self.dumps[mode], group)
                self.assertEqual(sorted(t), ["bias", "dk", "do", "dq", "dv", "k", "o", "q", "v"])
                self.assertEqual(
                    {k: attrs[k] for k in ("backend", "dtype", "mask_convention", "name",
                                           "function", "layer", "call_index")},
                    {"backend": "custom", "dtype": "float16", "mask_convention": "additive",
                     "name": f"encoder.layer.{i}.attention.self", "function": "eager_attention",
                     "layer": i, "call_index": i}, (mode, group))
                self.assertAlmostEqual(attrs["scale"], 32 ** -0.5, places=15)
                self.assertEqual(t["q"].dtype, torch.float16)
                self.assertTrue(torch.equal(t["bias"], bias), (mode, group))

    def test_scan_finds_score_overflow_in_layer_2_only(self):
        scans = self.scans["overflow"]
        overflow = [f for f in scans[LAYERS[2]]["findings"] if f["kind"] == "score_overflow"]
        self.assertEqual(len(overflow), 1)  # one finding per (kind, tensor), located per head
        self.assertEqual(sorted((loc["batch"], loc["head"]) for loc in overflow[0]["locations"]),
                         [(b, h) for b in range(8) for h in range(12)])
        self.assertTrue(all(f["severity"] == "error" and f["tensor"] == "S"
                            and f["modes"] == ["unfused"] for f in overflow))
        self.assertIn("> 65504 (fp16 max)", overflow[0]["message"])
        self.assertIn(("nonfinite_output", "O"), kinds(scans[LAYERS[2]]))
        for group in LAYERS[:2] + LAYERS[3:]:
            self.assertNotIn("score_overflow", {k for k, _ in kinds(scans[group])}, group)
        for group in LAYERS[:3]:
            self.assertNotIn(("nonfinite_input", "q"), kinds(scans[group]), group)
            self.assertIn(("nonfinite_input", "dO"), kinds(scans[group]), group)
        for group in LAYERS[3:]:
            self.assertLessEqual({("nonfinite_input", "q"), ("nonfinite_input", "k"),
                                  ("nonfinite_input", "v")}, kinds(scans[group]), group)

    def test_scan_finds_mask_fill_overflow_and_the_padded_rows(self):
        first = self.scans["padding"][LAYERS[0]]
        self.assertLessEqual({("mask_fill_overflow", "bias"), ("fully_masked_row", "O"),
                              ("nonfinite_output", "O")}, kinds(first))
        self.assertNotIn(("nonfinite_input", "q"), kinds(first))
        fill = [f for f in first["findings"] if f["kind"] == "mask_fill_overflow"]
        self.assertTrue(all("-1e9" in f["message"] for f in fill))
        rows = sorted((loc["batch"], loc["rows"]) for f in first["findings"]
                      if f["kind"] == "fully_masked_row" for loc in f["locations"])
        expected = [(b, [n, 13]) for b, n in enumerate(self.valid_lengths) if n < 14]
        self.assertEqual(rows, expected)
        self.assertEqual(len(expected), 7)
        t, _ = read_case(self.dumps["padding"], LAYERS[0])
        self.assertEqual((t["bias"].dtype, float(t["bias"].min())), (torch.float32, -1e9))
        for group in LAYERS[1:]:
            self.assertIn(("nonfinite_input", "q"), kinds(self.scans["padding"][group]), group)


if __name__ == "__main__":
    unittest.main()
