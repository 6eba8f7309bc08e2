"""What one attention call computes, in schema terms (CallSpec), as its hook reads it from the
call's arguments: the reading of SDPA and of @attention functions here, the libraries' in
hooks_flex.py, hooks_xformers.py, hooks_flash_attn.py, which share the helpers below.
"""
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from .semantics import CUSTOM_BACKEND, call_attributes, sdpa_backend


class Unrecordable(Exception):
    """A call the dump schema cannot express: the recorder warns once per `key` and lets the
    call run unrecorded."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def first_output(out) -> dict:
    """Outputs of a call that returns o or (o, ...)."""
    return {"o": out if isinstance(out, torch.Tensor) else out[0]}


@dataclass
class CallSpec:
    """tensors: datasets read from the arguments, q, k, v as passed (their gradients are caught)
    then mask / bias / cu_seqlens_q, ...; attrs: group attributes; sdpa_args: (dropout_p,
    is_causal, scale as passed, enable_gqa) for dropout replay; attn_mask: SDPA's mask as
    passed (dropout replay); outputs: return value -> {"o": o, "lse": ...}; squeeze_batch: q, k,
    v, o and their gradients are [1, T, H, D] stored as THD [T, H, D]; bshd_outputs: o and dO
    are [B, Sq, H, D] (q, k, v BHSD) and stored transposed to [B, H, Sq, D]; warning: (key, message)
    the recorder gives once per key, a tuple (kind, ...)."""

    tensors: dict
    attrs: dict
    sdpa_args: tuple = (0.0, False, None, False)
    attn_mask: Optional[torch.Tensor] = None
    outputs: Callable = first_output
    squeeze_batch: bool = False
    bshd_outputs: bool = False
    warning: Optional[tuple] = None


def default_scale(q, scale) -> float:
    return float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1])


def score_dtype(q) -> torch.dtype:
    """Precision scores are computed in (also that of materialised score biases): float64 for
    float64 q, else float32."""
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def sdpa_like(value, custom: bool) -> CallSpec:
    """Reading of an SDPA call, or of an @attention function (custom); value: bind()'s."""
    q, k, v, attn_mask = (value[n] for n in ("q", "k", "v", "attn_mask"))
    if not 2 <= q.dim() <= 4:
        raise Unrecordable("dims", f"q has {q.dim()} dimensions, not 2 to 4")
    dropout_p, is_causal = float(value["dropout_p"] or 0.0), bool(value["is_causal"])
    scale, enable_gqa = value["scale"], bool(value["enable_gqa"])
    backend = CUSTOM_BACKEND if custom else sdpa_backend(q, k, v, attn_mask, dropout_p,
                                                         is_causal, scale, enable_gqa)
    tensors = {"q": q, "k": k, "v": v}
    if attn_mask is not None:
        tensors["mask" if attn_mask.dtype == torch.bool else "bias"] = attn_mask
    attrs = {"layout": "BHSD", "scale": default_scale(q, scale), "causal": is_causal,
             "enable_gqa": enable_gqa, **call_attributes(q, backend)}
    if is_causal:
        attrs["causal_align"] = "top_left"
    if dropout_p:
        attrs["dropout_p"] = dropout_p
    return CallSpec(tensors, attrs, (dropout_p, is_causal, scale, enable_gqa),
                    None if attn_mask is None else attn_mask.detach())


def read_sdpa(value, arguments) -> CallSpec:
    """Hook reading of torch.nn.functional.scaled_dot_product_attention."""
    return sdpa_like(value, custom=False)


def read_custom(value, arguments) -> CallSpec:
    """Hook reading of an @attention function."""
    return sdpa_like(value, custom=True)


def library_attrs(q, backend, version, layout, scale, follows_autocast=False) -> dict:
    """Attributes of every library call: layout, scale (None: 1/sqrt(D)), causal (False until
    the reading says otherwise), library_version, torch_version, backend, dtype."""
    return {"layout": layout, "scale": default_scale(q, scale), "causal": False,
            "library_version": str(version), **call_attributes(q, backend, follows_autocast)}


def make_packed(spec: CallSpec, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """Turns `spec` into a packed-sequence (THD) case: q [Tq, H, D], k [Tk, Hk, D]; sequence i
    holds tokens cu_seqlens[i]:cu_seqlens[i + 1] (int32/int64 [N+1] starts from 0)."""
    spec.tensors.update(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    spec.attrs.update(layout="THD", max_seqlen_q=int(max_seqlen_q),
                      max_seqlen_k=int(max_seqlen_k))


def longest(cu_seqlens) -> int:
    """Length of the longest sequence of [N+1] starts."""
    return int((cu_seqlens[1:] - cu_seqlens[:-1]).max()) if cu_seqlens.numel() > 1 else 0
