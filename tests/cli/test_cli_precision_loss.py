"""scan's precision_loss numbers are genuine: the error attnscope reports for unfused fp16 on a
case of the bundled training series equals that of PyTorch's own eager fp16 attention on the
same tensors, and only the unfused run is flagged (the fused kernel keeps the scores in fp32)."""
import re
import unittest

import h5py
import numpy as np
import torch

from cli_support import SAMPLE, CliTestCase, run_cli

CASE = "/train/step_002/layer_02"


def eager(q, k, v, dout, dtype, scale):
    """O = softmax(q @ k^T * scale, causally masked with -inf) @ v in `dtype`; dQ, dK, dV by
    autograd."""
    q, k, v = [t.to(dtype).detach().requires_grad_() for t in (q, k, v)]
    s = (q @ k.transpose(-1, -2)) * scale
    causal = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
    o = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1) @ v
    o.backward(dout.to(dtype))
    return {"O": o, "dQ": q.grad, "dK": k.grad, "dV": v.grad}


class CliPrecisionLossTest(CliTestCase):
    # Within 1 percentage point of torch's error: max over heads of max|x - ref| / max|ref|.
    def test_cli_precision_loss_equals_torch_eager_fp16_error(self):
        with h5py.File(SAMPLE, "r") as f:
            g = f[CASE]
            q, k, v, dout = [torch.from_numpy(np.array(g[n])).double()
                             for n in ("q", "k", "v", "do")]
        scale = 1.0 / 8.0
        ref = eager(q, k, v, dout, torch.float64, scale)
        half = eager(q, k, v, dout, torch.float16, scale)
        torch_error = {}
        for name in ref:
            r, x = ref[name][0], half[name][0].double()
            torch_error[name] = max(((x[h] - r[h]).abs().max() / r[h].abs().max()).item()
                                    for h in range(2))

        doc = self.json_of(run_cli("scan", "--json", f"{SAMPLE}::{CASE}"))
        findings = doc["cases"][0]["findings"]
        loss = {f["tensor"]: f for f in findings if f["kind"] == "precision_loss"}
        self.assertEqual(sorted(loss), ["O", "dK"])
        for name, f in loss.items():
            self.assertEqual((f["modes"], f["severity"]), (["unfused"], "warning"), name)
            reported = float(re.search(r"off by up to ([0-9.]+)%", f["message"]).group(1)) / 100
            self.assertLessEqual(abs(reported - torch_error[name]), 0.01,
                                 f"{name}: attnscope unfused fp16 {reported:.4f}, "
                                 f"torch eager fp16 {torch_error[name]:.4f}")


if __name__ == "__main__":
    unittest.main()
