"""Recording where no gradient is tracked: SDPA calls under torch.inference_mode() (whose tensors
keep no version counter) and under torch.no_grad() are written as forward-only cases (q, k, v,
o), the recording goes on across steps, and a NaN that appears during generation is found by
attnscope-cli scan in the step and layer it appeared."""
import os
import tempfile
import unittest
import warnings

import torch
import torch.nn.functional as F

from attnscope_record import Recorder
from attnscope_test_util import read_case, scan_errors


class Decoder(torch.nn.Module):
    """Two causal self-attention layers over x [B, H, S, D]."""

    def forward(self, x):
        for _ in range(2):
            x = F.scaled_dot_product_attention(x, x, x, is_causal=True)
        return x


class InferenceTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "generate.h5")

    def tearDown(self):
        self.dir.cleanup()

    def test_inference_mode_and_no_grad_calls_are_recorded_forward_only(self):
        model = Decoder()
        torch.manual_seed(0)
        rec = Recorder(self.path)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a stopped recording fails the test
            for step in range(3):
                x = torch.randn(1, 2, 6 + step, 8)
                if step == 2:
                    x[0, 1, 4, 3] = float("nan")  # the generation step whose input goes bad
                guard = torch.inference_mode() if step != 1 else torch.no_grad()
                with rec.step(step), guard:
                    model(x)
            rec.close()
        for step in range(3):
            for layer in range(2):
                tensors, _ = read_case(self.path, f"/step_{step:06d}/layer_{layer:02d}")
                self.assertEqual(sorted(tensors), ["k", "o", "q", "v"], (step, layer))
        tensors, _ = read_case(self.path, "/step_000002/layer_00")
        self.assertTrue(torch.isnan(tensors["q"][0, 1, 4, 3]))
        errors = scan_errors(self.path)
        self.assertIn(("/step_000002/layer_00", "nonfinite_input"), errors)
        self.assertFalse([e for e in errors if not e[0].startswith("/step_000002/")], errors)


if __name__ == "__main__":
    unittest.main()
