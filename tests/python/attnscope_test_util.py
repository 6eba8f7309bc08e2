"""Shared helpers of the python-labelled tests: attnscope-cli runs, reading schema-1 cases back
into torch tensors (bfloat16 from its uint16 bit patterns), and DESIGN section 3's accuracy
rule with torch references (fp64 autograd and same-precision unfused attention)."""
import json
import os
import subprocess

import h5py
import numpy as np
import torch

CLI = os.environ.get("ATTNSCOPE_CLI", "attnscope-cli")
GRADIENTS = ("dq", "dk", "dv")


def cli(*args, expect=None):
    """(exit code, stdout, stderr) of attnscope-cli; checks the exit code if `expect` given."""
    run = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=600)
    if expect is not None and run.returncode != expect:
        raise AssertionError(f"attnscope-cli {' '.join(map(str, args))}: exit {run.returncode}, "
                             f"expected {expect}\nstdout:\n{run.stdout[-3000:]}\n"
                             f"stderr:\n{run.stderr[-3000:]}")
    return run.returncode, run.stdout, run.stderr


def cli_json(*args, expect=None):
    return json.loads(cli(*args, "--json", expect=expect)[1])


def scan_errors(path):
    """(case path, finding kind) of every error-severity finding of `attnscope-cli scan`."""
    doc = cli_json("scan", path, "--threads", "2")
    return [(c["path"], f["kind"]) for c in doc["cases"] for f in c["findings"]
            if f["severity"] == "error"]


def read_tensor(dataset) -> torch.Tensor:
    """The dataset's exact values as a torch tensor of the stored precision."""
    a = dataset[()]
    if dataset.attrs.get("dtype") == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def read_case(path, group):
    with h5py.File(path, "r") as f:
        g = f[group]
        return ({n: read_tensor(g[n]) for n in g}, dict(g.attrs))


def attention_math(q, k, v, do, scale, mask=None, bias=None, dtype=torch.float64, softcap=0.0):
    """Unfused attention and its gradients with every op in `dtype` (float64 = reference), in
    attnscope's order (scale, softcap, + bias, mask): returns {o, dq, dk, dv}."""
    q, k, v = (t.to(dtype).detach().requires_grad_(True) for t in (q, k, v))
    s = (q @ k.transpose(-2, -1)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias.to(dtype)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do.to(dtype))
    return {"o": o.detach(), "dq": dq, "dk": dk, "dv": dv}


def max_error(a, b) -> float:
    return float((a.double() - b.double()).abs().max())


def cosine(a, b) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b / (a.norm() * b.norm()))


def accuracy_bound(name, ref64, unfused, precision) -> float:
    """DESIGN section 3: fp32 -> 1e-5 relative to max|ref|; fp16/bf16 -> factor * max|unfused -
    ref| + 1e-6 * max(1, max|ref|), factor 3 for gradients, 2 otherwise (as core/analysis)."""
    top = float(ref64.abs().max())
    if precision == torch.float32:
        return 1e-5 * max(top, 1e-30)
    factor = 3.0 if name in GRADIENTS else 2.0
    return factor * max_error(unfused, ref64) + 1e-6 * max(1.0, top)
