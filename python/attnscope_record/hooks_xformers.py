"""xformers hook: xformers.ops.memory_efficient_attention (also exported by xformers.ops.fmha),
patched when the user loaded xformers. Tensors are BMHK: q [B, Mq, H, K], k [B, Mk, H, K],
layout "BSHD"; backend "xformers", library_version xformers.__version__. Only 4-D calls are
recorded (3-D BMK and 5-D BMGHK ones warn).

attn_bias as the case reads it, classes matched exactly (a subclass adds terms, so it is
materialised) from the loaded xformers.ops.fmha.attn_bias:
- a tensor: `bias`, as passed (broadcast against [B, H, Mq, Mk]);
- LowerTriangularMask: causal, causal_align "top_left";
- BlockDiagonalMask, BlockDiagonalCausalMask (causal top-left in each block),
  BlockDiagonalCausalFromBottomRightMask: packed sequences of a [1, T, H, K] batch, a THD case
  whose cu_seqlens_q / cu_seqlens_k are the masks' q_seqinfo / k_seqinfo.seqstart;
- any other AttentionBias: materialize((B, H, Mq, Mk)) in float32 as `bias`; without
  materialize the call is not recorded (warning).
Untested against the real library (it needs CUDA): tests use a pure-torch stand-in.
"""
import sys

import torch

from . import compiled, hooks
from .spec import CallSpec, Unrecordable, library_attrs, longest, make_packed

_BIAS_MODULE = "xformers.ops.fmha.attn_bias"
# Packed-sequence masks: class name -> causal_align (None: not causal).
_BLOCK_DIAGONAL = {"BlockDiagonalMask": None, "BlockDiagonalCausalMask": "top_left",
                   "BlockDiagonalCausalFromBottomRightMask": "bottom_right"}


def _bias_class_name(bias):
    """Name of attn_bias's class when it is one of xformers' own (exactly), else None."""
    module = sys.modules.get(_BIAS_MODULE)
    name = type(bias).__name__
    return name if module is not None and getattr(module, name, None) is type(bias) else None


def read_xformers(value, arguments) -> CallSpec:
    """Hook reading of memory_efficient_attention(query, key, value, attn_bias, p, scale)."""
    q, k, v = value["q"], value["k"], value["v"]
    if q.dim() != 4:
        raise Unrecordable("dims", f"q has {q.dim()} dimensions: only BMHK (4-D) calls are "
                                   "recorded")
    bias, p, scale = arguments["attn_bias"], float(arguments["p"] or 0.0), arguments["scale"]
    attrs = library_attrs(q, "xformers", sys.modules["xformers"].__version__, "BSHD", scale)
    if p:
        attrs["dropout_p"] = p
    spec = CallSpec({"q": q, "k": k, "v": v}, attrs, (p, False, scale, False))
    kind = _bias_class_name(bias)
    if bias is None:
        pass
    elif isinstance(bias, torch.Tensor):
        spec.tensors["bias"] = bias
    elif kind == "LowerTriangularMask":
        attrs.update(causal=True, causal_align="top_left")
    elif kind in _BLOCK_DIAGONAL:
        if q.shape[0] != 1:
            raise Unrecordable("packed_batch", f"{kind} with a batch of {q.shape[0]}, not 1")
        cu_q, cu_k = bias.q_seqinfo.seqstart, bias.k_seqinfo.seqstart
        make_packed(spec, cu_q, cu_k, longest(cu_q), longest(cu_k))
        spec.squeeze_batch = True
        if _BLOCK_DIAGONAL[kind]:
            attrs.update(causal=True, causal_align=_BLOCK_DIAGONAL[kind])
    elif hasattr(bias, "materialize"):
        shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
        spec.tensors["bias"] = bias.materialize(shape, dtype=torch.float32, device=q.device)
    else:
        raise Unrecordable("attn_bias", f"attn_bias {type(bias).__name__} has no materialize()")
    return spec


XFORMERS_HOOK = hooks.Hook("memory_efficient_attention",
                           (("xformers.ops", "memory_efficient_attention"),
                            ("xformers.ops.fmha", "memory_efficient_attention")),
                           read_xformers, compiled.uncaptured)
