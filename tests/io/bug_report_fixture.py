#!/usr/bin/env python3
"""Writes bug-report files with the real libraries, and their h5py references.

    bug_report_fixture.py OUTDIR

For each file OUTDIR/NAME.{pt,npz,safetensors} written by torch.save, numpy.savez /
savez_compressed or safetensors.torch.save_file (shaped like the dicts attached to attention
bug reports: pytorch #119320 q/k/v/out/out_grad, #109517 query/key/value/attn_mask,
flash-attention users' bf16 views of a packed qkv, nested per-layer dicts, a list of dicts),
OUTDIR/NAME.ref.h5 holds the same cases written by h5py: contiguous arrays under the canonical
names, bfloat16 as uint16 + dtype attribute, the scalars as attributes. The C++ tests read both
with DumpReader and require bit-identical tensors. Also writes nan_in_q.pt (one NaN in q, for
the scan findings), uint16_q.pt (a dtype torch saves with _rebuild_tensor_v3) and
armed_os_system.pt / armed_stack_global.pt (pickles that would run
`touch OUTDIR/pwned_*` when torch.load-ed: the refusal tests prove they never run).
"""
import os
import sys

import h5py
import numpy as np
import torch
from safetensors.torch import save_file

OUT = sys.argv[1] if len(sys.argv) > 1 else "bug_reports"
os.makedirs(OUT, exist_ok=True)
gen = torch.Generator().manual_seed(16)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


def to_numpy(t):
    """(array, dtype attribute) as h5py stores it; bfloat16 as its uint16 bits."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), "bfloat16"
    return t.numpy(), None


CANONICAL = {"query": "q", "key": "k", "value": "v", "out": "o", "out_grad": "do",
             "attn_mask": "mask", "grad_q": "dq"}


def write_ref(name, cases):
    """cases: {path: (tensors dict, attrs dict)} with torch tensors under any alias."""
    with h5py.File(os.path.join(OUT, name + ".ref.h5"), "w") as f:
        for path, (tensors, attrs) in cases.items():
            g = f.require_group(path)
            for key, t in tensors.items():
                canonical = CANONICAL.get(key, key)
                if canonical == "mask" and t.is_floating_point():
                    canonical = "bias"
                array, tag = to_numpy(t)
                g[canonical] = array
                if tag:
                    g[canonical].attrs["dtype"] = tag
            for key, value in attrs.items():
                g.attrs[key] = value


def sdpa_case(b, h, s, d, dtype=torch.float32, keys=("q", "k", "v", "out", "out_grad")):
    q, k, v = (randn(b, h, s, d).requires_grad_() for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    grad = randn(b, h, s, d)
    out.backward(grad)
    values = [q, k, v, out, grad]
    return {key: value.detach().to(dtype) for key, value in zip(keys, values)}


def flat_fp32():
    # pytorch #119320: q, k, v, out, out_grad of an SDPA call, fp32, plus scale / is_causal.
    tensors = sdpa_case(2, 4, 33, 16)
    # Next to the tensors, values bug reports carry: a torch.Size, a torch.device, a dtype.
    extra = {"input_shape": tensors["q"].shape, "device": torch.device("cpu"),
             "torch_dtype": torch.float32}
    torch.save(dict(tensors, scale=0.2, is_causal=False, **extra),
               os.path.join(OUT, "flat_fp32.pt"))
    write_ref("flat_fp32", {"/case": (tensors, {"scale": 0.2, "causal": False})})
    torch.save(dict(tensors, scale=0.2, is_causal=False), os.path.join(OUT, "flat_proto4.pt"),
               pickle_protocol=4)
    write_ref("flat_proto4", {"/case": (tensors, {"scale": 0.2, "causal": False})})


def bf16_views():
    # A packed qkv [B, S, 3, H, D] in bfloat16 and q / k / v as strided views of it (storage
    # offsets 0, H*D, 2*H*D), transposed to BHSD; a 0-d tensor scale; is_causal True.
    qkv = randn(2, 17, 3, 4, 8, dtype=torch.bfloat16)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous() and k.storage_offset() == 32
    do = randn(2, 17, 4, 8, dtype=torch.bfloat16).transpose(1, 2)
    tensors = {"q": q, "k": k, "v": v, "do": do}
    torch.save(dict(tensors, scale=torch.tensor(0.375), is_causal=True),
               os.path.join(OUT, "bf16_views.pt"))
    write_ref("bf16_views", {"/case": (tensors, {"scale": 0.375, "causal": True})})


def query_key_value_mask():
    # pytorch #109517: query / key / value / attn_mask, here fp16 with a float mask holding
    # finfo.min for the padded keys (read as an additive bias).
    t = {name: randn(1, 2, 9, 8, dtype=torch.float16) for name in ("query", "key", "value")}
    mask = torch.zeros(1, 1, 9, 9, dtype=torch.float16)
    mask[..., 6:] = torch.finfo(torch.float16).min
    t["attn_mask"] = mask
    torch.save(t, os.path.join(OUT, "query_key_value_mask.pt"))
    write_ref("query_key_value_mask", {"/case": (t, {})})


def nested_and_list():
    # A dict per step and layer (numbers ordered numerically) with a file-level is_causal, and
    # a list of dicts with bool masks.
    layers = {}
    refs = {}
    for layer in (10, 2):
        t = sdpa_case(1, 2, 5, 4, keys=("q", "k", "v", "o", "do"))
        layers["layer_%d" % layer] = t
        refs["/step_3/layer_%d" % layer] = (t, {"causal": True})
    torch.save({"is_causal": True, "step_3": layers}, os.path.join(OUT, "nested_layers.pt"))
    write_ref("nested_layers", refs)
    items, refs = [], {}
    for i in range(3):
        t = {"q": randn(1, 1, 4, 8), "k": randn(1, 1, 6, 8), "v": randn(1, 1, 6, 8),
             "mask": torch.rand(1, 1, 4, 6, generator=gen) > 0.3}
        items.append(t)
        refs["/%d" % i] = (t, {})
    torch.save(items, os.path.join(OUT, "list_of_dicts.pt"))
    write_ref("list_of_dicts", refs)


def npz_files():
    t = sdpa_case(1, 2, 6, 8, keys=("q", "k", "v", "o", "do"))
    arrays = {key: value.numpy() for key, value in t.items()}
    arrays["q"] = arrays["q"].astype(np.float16)
    arrays["k"] = np.asfortranarray(arrays["k"])  # column-major .npy
    arrays["mask"] = np.tril(np.ones((6, 6), dtype=bool))
    ref = {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in arrays.items()}
    np.savez(os.path.join(OUT, "sdpa.npz"), scale=np.float64(0.25), **arrays)
    write_ref("sdpa", {"/case": (ref, {"scale": 0.25})})
    layered = {"layer_%d/%s" % (layer, key): value for layer in (0, 1) for key, value in
               arrays.items()}
    np.savez_compressed(os.path.join(OUT, "sdpa_compressed.npz"), **layered)
    write_ref("sdpa_compressed", {"/layer_%d" % layer: (ref, {}) for layer in (0, 1)})


def safetensors_file():
    t = sdpa_case(2, 2, 7, 8, dtype=torch.bfloat16, keys=("q", "k", "v", "o", "do"))
    named = {"layers.%d.%s" % (layer, key): value.clone() for layer in (0, 1)
             for key, value in t.items()}
    save_file(named, os.path.join(OUT, "sdpa_st.safetensors"),
              metadata={"is_causal": "true", "scale": "0.125"})
    write_ref("sdpa_st", {"/layers/%d" % layer: (t, {"causal": True, "scale": 0.125})
                          for layer in (0, 1)})


def uint16_file():
    tensors = sdpa_case(1, 2, 4, 8)
    tensors["q"] = tensors["q"].half().view(torch.uint16)  # saved by _rebuild_tensor_v3
    torch.save(tensors, os.path.join(OUT, "uint16_q.pt"))


def nan_file():
    tensors = sdpa_case(2, 4, 12, 8)
    tensors["q"][0, 1, 5, 3] = float("nan")
    torch.save(tensors, os.path.join(OUT, "nan_in_q.pt"))


class Payload:
    """Unpickling it runs `touch PATH` (what a hostile .pt does with os.system)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch " + self.path,))


def armed_files():
    t = sdpa_case(1, 1, 4, 8)
    for name, protocol in (("armed_os_system", 2), ("armed_stack_global", 4)):
        marker = os.path.join(os.path.abspath(OUT), "pwned_" + name)
        if os.path.exists(marker):
            os.remove(marker)
        torch.save(dict(t, note=Payload(marker)), os.path.join(OUT, name + ".pt"),
                   pickle_protocol=protocol)


for make in (flat_fp32, bf16_views, query_key_value_mask, nested_and_list, npz_files,
             safetensors_file, nan_file, uint16_file, armed_files):
    make()
print("wrote", len(os.listdir(OUT)), "files to", OUT)
