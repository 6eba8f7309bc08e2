#!/usr/bin/env python3
"""Writes packed-sequence (THD + cu_seqlens) files with the real libraries, and references.

    packed_fixture.py OUTDIR

A varlen cross-attention batch of 3 sequences (query lengths 5, 7, 4; key lengths 6, 9, 5;
H = 4 query heads, Hk = 2 kv heads, D = 8, Dv = 6), outputs and gradients computed by torch
per sequence (causal, bottom-right aligned as flash_attn_varlen_func; the .npz one not causal), stored packed as
FlashAttention takes them: q [Tq, H, D], lse [H, Tq], cu_seqlens int32 [4]. Written as
packed.pt (torch.save, bfloat16, keys as in bug reports: cu_seqlens_q, softmax_lse, ...),
packed.npz (numpy.savez, float32, int64 starts), packed.safetensors (float16) and packed.h5
(h5py, float32). packed_*.ref.h5 hold each sequence as its own BHSD case /layer_0/seq_I,
cut by h5py from the same tensors: the C++ tests require bit-identical cases.

Also: packed_leaky_mask.h5 (SDPA packing: self-attention over 3 documents in one batch row
[1, H, T, D] with a [T, T] block-diagonal causal mask in which one query of sequence 1 sees a
key of sequence 0), and invalid ones: packed_bad_decreasing.h5, packed_bad_beyond.h5,
packed_bad_no_keys.h5, packed_bad_no_k_starts.h5, packed_bad_two_rows.h5 (starts over a batch
of 2).
"""
import math
import os
import sys

import h5py
import numpy as np
import torch
from safetensors.torch import save_file

OUT = sys.argv[1] if len(sys.argv) > 1 else "packed"
os.makedirs(OUT, exist_ok=True)
gen = torch.Generator().manual_seed(27)

Q_LENS, K_LENS = (5, 7, 4), (6, 9, 5)
H, HK, D, DV = 4, 2, 8, 6


def starts(lengths):
    return torch.tensor([0] + list(np.cumsum(lengths)), dtype=torch.int32)


def varlen_batch(dtype, causal=True):
    """Packed tensors (dict of torch tensors in `dtype`; lse float32) of the varlen batch."""
    cq, ck = starts(Q_LENS), starts(K_LENS)
    tq, tk = int(cq[-1]), int(ck[-1])
    q = torch.randn(tq, H, D, generator=gen).to(dtype)
    k = torch.randn(tk, HK, D, generator=gen).to(dtype)
    v = torch.randn(tk, HK, DV, generator=gen).to(dtype)
    do = torch.randn(tq, H, DV, generator=gen).to(dtype)
    leaves = [t.float().clone().requires_grad_() for t in (q, k, v)]
    outs, lses = [], []
    for i in range(len(Q_LENS)):
        a, b, c, e = int(cq[i]), int(cq[i + 1]), int(ck[i]), int(ck[i + 1])
        qs, ks, vs = (t.transpose(0, 1) for t in (leaves[0][a:b], leaves[1][c:e], leaves[2][c:e]))
        ks, vs = (t.repeat_interleave(H // HK, 0) for t in (ks, vs))
        s = qs @ ks.transpose(-1, -2) / math.sqrt(D)
        if causal:  # bottom-right aligned
            keep = torch.ones(b - a, e - c).tril(e - c - (b - a)).bool()
            s = s.masked_fill(~keep, -math.inf)
        lses.append(torch.logsumexp(s, -1))
        outs.append((torch.softmax(s, -1) @ vs).transpose(0, 1))
    o = torch.cat(outs)
    o.backward(do.float())
    grads = [t.grad.to(dtype) for t in leaves]
    return {"q": q, "k": k, "v": v, "out": o.detach().to(dtype), "softmax_lse":
            torch.cat(lses, -1).detach(), "dout": do, "dq": grads[0], "dk": grads[1],
            "dv": grads[2], "cu_seqlens_q": cq, "cu_seqlens_k": ck}


CANONICAL = {"out": "o", "softmax_lse": "lse", "dout": "do"}
ATTRS = {"causal": True, "causal_align": "bottom_right", "backend": "flash_attn"}


def h5_array(t):
    """(array, dtype attribute) as h5py stores it; bfloat16 as its uint16 bits."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), "bfloat16"
    return t.numpy(), None


def put(group, name, t):
    array, tag = h5_array(t)
    group[name] = array
    if tag:
        group[name].attrs["dtype"] = tag


def write_reference(name, packed, attrs=ATTRS):
    """Each sequence as a BHSD case [1, H, L, D] / lse [1, H, L], cut from `packed`."""
    cq, ck = packed["cu_seqlens_q"], packed["cu_seqlens_k"]
    with h5py.File(os.path.join(OUT, name + ".ref.h5"), "w") as f:
        for i in range(len(cq) - 1):
            g = f.require_group("/layer_0/seq_%d" % i)
            a, b, c, e = int(cq[i]), int(cq[i + 1]), int(ck[i]), int(ck[i + 1])
            for key, t in packed.items():
                if key.startswith("cu_seqlens"):
                    continue
                canonical = CANONICAL.get(key, key)
                if canonical == "lse":
                    put(g, canonical, t[:, a:b][None])
                    continue
                rows = (c, e) if canonical in ("k", "v", "dk", "dv") else (a, b)
                put(g, canonical, t[rows[0]:rows[1]].transpose(0, 1)[None])
            for key, value in attrs.items():
                g.attrs[key] = value


def write_h5(path, tensors, attrs):
    with h5py.File(path, "w") as f:
        g = f.require_group("/layer_0")
        for key, t in tensors.items():
            put(g, CANONICAL.get(key, key), t)
        for key, value in attrs.items():
            g.attrs[key] = value


def packed_formats():
    bf16 = varlen_batch(torch.bfloat16)
    torch.save({"layer_0": dict(bf16, is_causal=True, causal_align="bottom_right",
                                backend="flash_attn", max_seqlen_q=7)},
               os.path.join(OUT, "packed.pt"))
    write_reference("packed_pt", bf16)

    # .npz holds no text scalars (causal_align): a non-causal batch.
    f32 = varlen_batch(torch.float32, causal=False)
    np.savez(os.path.join(OUT, "packed.npz"),
             **{"layer_0/" + k: (t.numpy().astype(np.int64) if k.startswith("cu_") else t.numpy())
                for k, t in f32.items()})
    write_reference("packed_npz", f32, {})

    f16 = varlen_batch(torch.float16)
    save_file({"layer_0." + k: t.contiguous() for k, t in f16.items()},
              os.path.join(OUT, "packed.safetensors"),
              metadata={k: str(v).lower() if isinstance(v, bool) else v for k, v in ATTRS.items()})
    write_reference("packed_safetensors", f16)

    h5 = varlen_batch(torch.float32)
    write_h5(os.path.join(OUT, "packed.h5"), h5, dict(ATTRS, layout="THD"))
    write_reference("packed_h5", h5)


def leaky_and_invalid():
    lengths = (4, 6, 5)
    t = sum(lengths)
    cu = starts(lengths)
    mask = torch.zeros(t, t, dtype=torch.bool)
    for i in range(len(lengths)):
        a, b = int(cu[i]), int(cu[i + 1])
        mask[a:b, a:b] = torch.ones(b - a, b - a).tril().bool()
    mask[4 + 2, 1] = True  # row 2 of sequence 1 sees key token 1 of sequence 0
    qkv = {n: torch.randn(t, H, D, generator=gen) for n in ("q", "k", "v")}
    # SDPA packing: one batch row [1, H, T, D] (BHSD) with the [T, T] mask.
    write_h5(os.path.join(OUT, "packed_leaky_mask.h5"),
             dict({n: x.transpose(0, 1)[None] for n, x in qkv.items()}, mask=mask,
                  cu_seqlens_q=cu), {})
    write_h5(os.path.join(OUT, "packed_bad_two_rows.h5"),
             dict({n: x.transpose(0, 1)[None].repeat(2, 1, 1, 1) for n, x in qkv.items()},
                  cu_seqlens_q=cu), {})
    bad = {"decreasing": torch.tensor([0, 9, 4, 15], dtype=torch.int32),
           "beyond": torch.tensor([0, 4, 10, 16], dtype=torch.int32)}
    for name, cu_bad in bad.items():
        write_h5(os.path.join(OUT, "packed_bad_%s.h5" % name), dict(qkv, cu_seqlens_q=cu_bad),
                 {"layout": "THD"})
    write_h5(os.path.join(OUT, "packed_bad_no_keys.h5"),
             dict(qkv, cu_seqlens_q=cu, cu_seqlens_k=torch.tensor([0, 4, 4, 15], dtype=torch.int32)),
             {"layout": "THD"})
    write_h5(os.path.join(OUT, "packed_bad_no_k_starts.h5"),
             dict(qkv, k=qkv["k"][:12], v=qkv["v"][:12], cu_seqlens_q=cu), {"layout": "THD"})


packed_formats()
leaky_and_invalid()
print("wrote", len(os.listdir(OUT)), "files to", OUT)
