"""The pretrained all-MiniLM-L6-v2 (transformers' BertModel, 6 layers x 12 heads) recorded
through SDPA in fp32, bf16 and fp16: what the recorder wrote (run semantics, transformers'
key-padding mask), read back by the C++ reader (attnscope-cli info), recomputed by the CPU fused
kernel at the recorded precision (attnscope-cli run) and compared with PyTorch's own o, dq, dk,
dv under DESIGN section 3's accuracy rule (fp64 autograd reference, same-precision unfused
baseline); `attnscope-cli scan` finds no error on the healthy dumps. Only
test_recorder_wrote_sdpa_run_semantics is independent of attnscope-cli's output.
"""
import os
import tempfile
import unittest

import h5py
import torch

import minilm_dump
from attnscope_test_util import (accuracy_bound, attention_math, cli, cli_json, cosine,
                                 max_error, read_case)

LAYERS = [f"/step_000000/layer_{i:02d}" for i in range(6)]
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class MiniLMEndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.dumps, cls.results = {}, {}
        for name in PRECISIONS:
            dump = os.path.join(cls.dir.name, f"minilm_{name}.h5")
            rec, model, loss = minilm_dump.run(dump, "healthy", name)
            assert rec.stopped is None and torch.isfinite(loss), rec.stopped
            out = os.path.join(cls.dir.name, f"recomputed_{name}.h5")
            cli("run", dump, "--out", out, "--threads", "2", expect=0)
            cls.dumps[name], cls.results[name] = dump, out
        cls.valid = model.tokenize(minilm_dump.ANCHORS + minilm_dump.POSITIVES)[1]

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_recorder_wrote_sdpa_run_semantics(self):
        for name, dtype in (("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16")):
            with h5py.File(self.dumps[name], "r") as f:
                self.assertEqual((f.attrs["attnscope_schema"], f.attrs["attnscope_schema_minor"]),
                                 (1, 2))
                self.assertTrue(f.attrs["writer"].startswith("attnscope_record "))
            for i, group in enumerate(LAYERS):
                t, attrs = read_case(self.dumps[name], group)
                self.assertEqual(sorted(t), ["dk", "do", "dq", "dv", "k", "mask", "o", "q", "v"])
                self.assertEqual(
                    {k: attrs[k] for k in ("backend", "dtype", "mask_convention", "name",
                                           "function", "layer", "call_index", "micro_batch")},
                    {"backend": "sdpa_flash", "dtype": dtype, "mask_convention": "attend",
                     "name": f"encoder.layer.{i}.attention.self",
                     "function": "scaled_dot_product_attention", "layer": i, "call_index": i,
                     "micro_batch": 0}, group)
                self.assertEqual(attrs["torch_version"], torch.__version__)
                for key in ("autocast_dtype", "dropout_p", "dropout_replay", "causal_align"):
                    self.assertNotIn(key, attrs)
                self.assertFalse(bool(attrs["causal"]))
                # transformers' bidirectional mask: query i attends to the real keys.
                self.assertEqual(tuple(t["mask"].shape), (8, 1, 14, 14))
                self.assertTrue(torch.equal(t["mask"], self.valid[:, None, None, :].expand(
                    8, 1, 14, 14)))

    def test_cpp_reader_lists_six_layers_with_recorded_gradients(self):
        for name, dtype in (("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16")):
            doc = cli_json("info", self.dumps[name], expect=0)
            self.assertEqual([c["path"] for c in doc["cases"]], LAYERS)
            self.assertEqual(doc["rejected"], [])
            for i, case in enumerate(doc["cases"]):
                self.assertEqual(case["shape"], {"batch": 8, "heads": 12, "kv_heads": 12,
                                                 "seqlen_q": 14, "seqlen_k": 14,
                                                 "head_dim": 32, "head_dim_v": 32,
                                                 "q_broadcast": False, "kv_broadcast": False})
                self.assertEqual(sorted(case["recorded"]), ["dk", "dq", "dv", "o"])
                self.assertEqual(case["tensors"]["q"]["dtype"], dtype)
                self.assertEqual((case["config"]["step"], case["config"]["layer"]), (0, i))
                self.assertAlmostEqual(case["config"]["scale"], 32 ** -0.5, places=15)

    def check_precision(self, name):
        precision = PRECISIONS[name]
        print(f"\n{name}: layer tensor  max|C++ - torch|  bound  max|C++ - fp64|  "
              "max|torch - fp64|  cosine(C++, torch)")
        for layer, group in enumerate(LAYERS):
            t, attrs = read_case(self.dumps[name], group)
            r, _ = read_case(self.results[name], group)
            args = (t["q"], t["k"], t["v"], t["do"], attrs["scale"], t["mask"])
            ref = attention_math(*args)
            unfused = attention_math(*args, dtype=precision)
            for tensor in ("o", "dq", "dk", "dv"):
                ours, theirs = r[tensor].double(), t[tensor].double()
                # The fused kernel stores O, dQ, dK, dV once in the recorded precision.
                self.assertTrue(torch.equal(r[tensor], r[tensor].to(precision).float()))
                bound = accuracy_bound(tensor, ref[tensor], unfused[tensor], precision)
                diff, cos = max_error(ours, theirs), cosine(ours, theirs)
                ours_err, theirs_err = max_error(ours, ref[tensor]), max_error(theirs,
                                                                               ref[tensor])
                print(f"{name}: {layer} {tensor:2s} {diff:.3e} {bound:.3e} {ours_err:.3e} "
                      f"{theirs_err:.3e} {cos:.8f}")
                where = f"{name} layer {layer} {tensor}"
                self.assertLessEqual(ours_err, bound, where + ": C++ fused vs fp64")
                self.assertLessEqual(theirs_err, bound, where + ": PyTorch vs fp64")
                self.assertLessEqual(diff, bound, where + ": C++ fused vs PyTorch")
                self.assertGreater(cos, 0.9999999 if name == "fp32" else 0.9999, where)

    def test_fused_recompute_matches_pytorch_fp32(self):
        self.check_precision("fp32")

    def test_fused_recompute_matches_pytorch_bf16(self):
        self.check_precision("bf16")

    def test_fused_recompute_matches_pytorch_fp16(self):
        self.check_precision("fp16")

    def test_scan_finds_no_error_on_healthy_dumps(self):
        for name in PRECISIONS:
            doc = cli_json("scan", self.dumps[name], "--threads", "2", expect=0)
            self.assertEqual(len(doc["cases"]), 6)
            errors = [(c["path"], f["kind"]) for c in doc["cases"] for f in c["findings"]
                      if f["severity"] == "error"]
            self.assertEqual(errors, [], name)
            for case in doc["cases"]:
                self.assertEqual(case["config"]["precision"], name)


if __name__ == "__main__":
    unittest.main()
