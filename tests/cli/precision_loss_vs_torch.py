"""Checks that scan's precision_loss numbers on the bundled training series are genuine: the
error attnscope reports for unfused fp16 equals the error of PyTorch's own eager fp16 attention
(softmax(q @ k^T * scale).masked_fill(causal) @ v, with autograd) on the same tensors to
within 1 percentage point, and only the unfused run is flagged (the fused kernel keeps the
scores in fp32).

usage: precision_loss_vs_torch.py CLI SAMPLE
"""
import json
import re
import subprocess
import sys

import h5py
import numpy as np
import torch

CASE = "/train/step_002/layer_02"


def eager(q, k, v, dout, dtype, scale):
    q, k, v = [t.to(dtype).detach().requires_grad_() for t in (q, k, v)]
    s = (q @ k.transpose(-1, -2)) * scale
    causal = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
    o = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1) @ v
    o.backward(dout.to(dtype))
    return {"O": o, "dQ": q.grad, "dK": k.grad, "dV": v.grad}


def main() -> int:
    cli, sample = sys.argv[1:3]
    with h5py.File(sample, "r") as f:
        g = f[CASE]
        q, k, v, dout = [torch.from_numpy(np.array(g[n])).double() for n in ("q", "k", "v", "do")]
    scale = 1.0 / 8.0
    ref = eager(q, k, v, dout, torch.float64, scale)
    half = eager(q, k, v, dout, torch.float16, scale)
    torch_error = {}
    for name in ref:
        r, x = ref[name][0], half[name][0].double()
        torch_error[name] = max(((x[h] - r[h]).abs().max() / r[h].abs().max()).item() for h in range(2))

    run = subprocess.run([cli, "scan", "--json", f"{sample}::{CASE}"], capture_output=True, text=True)
    findings = json.loads(run.stdout)["cases"][0]["findings"]
    loss = {f["tensor"]: f for f in findings if f["kind"] == "precision_loss"}
    failures = []
    if sorted(loss) != ["O", "dK"]:
        failures.append(f"precision_loss on {sorted(loss)}, expected O and dK")
    for name, f in loss.items():
        reported = float(re.search(r"off by up to ([0-9.]+)%", f["message"]).group(1)) / 100
        print(f"{name}: attnscope unfused fp16 {reported:.4f}, torch eager fp16 {torch_error[name]:.4f}")
        if f["modes"] != ["unfused"] or f["severity"] != "warning":
            failures.append(f"{name}: {f['modes']} {f['severity']}, expected unfused warning")
        if abs(reported - torch_error[name]) > 0.01:
            failures.append(f"{name}: attnscope {reported} vs torch {torch_error[name]}")
    if failures:
        print("\n".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
