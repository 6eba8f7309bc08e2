#!/usr/bin/env python3
"""Writes resources/samples/eager_fp16_nan_grad.pt, the bundled bug-report file: what a user
attaches to an issue after a NaN in training, made with torch itself.

    make_bug_report_sample.py OUT.pt

A hand-written eager attention (softmax(q @ k^T * scale + mask) @ v, the code many models
carry) run in float16 on CPU over a padded batch: batch 1 holds 40 real tokens of 64, its
additive padding mask is -inf on padded keys and padded query rows, so rows 40-63 of batch 1
see no key and softmax gives NaN there, in `out` and in every gradient. Saved with
torch.save as a flat dict under the keys bug reports use: query, key, value, attn_mask, out,
out_grad, grad_query, grad_key, grad_value, is_causal, softmax_scale. Deterministic tensors
(a fixed generator; the archive's serialization id and its folder name, taken from the file
name, are the only bytes that differ between two runs). LibTorch runs its portable CPU kernels
(ATEN_CPU_CAPABILITY=default, oneDNN off) on one thread: its AVX2, AVX-512 and AMX kernels
round fp16 differently, and the file must come out the same on every x86-64 CPU.
"""
import math
import os
import sys

os.environ["ATEN_CPU_CAPABILITY"] = "default"  # read at torch's first dispatched op
import torch  # noqa: E402  (after the capability pin)

torch.backends.mkldnn.enabled = False
torch.set_num_threads(1)

B, H, S, D, REAL = 2, 4, 64, 32, 40


def make(path):
    gen = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(B, H, S, D, generator=gen).half() for _ in range(4))
    mask = torch.zeros(B, 1, S, S, dtype=torch.float16)
    mask[1, :, :, REAL:] = -math.inf  # padded keys
    mask[1, :, REAL:, :] = -math.inf  # padded queries see nothing
    scale = 1.0 / math.sqrt(D)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    scores = leaves[0] @ leaves[1].transpose(-1, -2) * scale + mask
    out = torch.softmax(scores, dim=-1) @ leaves[2]
    out.backward(do)
    torch.save({"query": q, "key": k, "value": v, "attn_mask": mask, "out": out.detach(),
                "out_grad": do, "grad_query": leaves[0].grad, "grad_key": leaves[1].grad,
                "grad_value": leaves[2].grad, "is_causal": False, "softmax_scale": scale},
               path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_bug_report_sample.py OUT.pt")
    make(sys.argv[1])
