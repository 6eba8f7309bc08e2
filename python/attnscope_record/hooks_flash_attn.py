"""FlashAttention hooks: flash_attn.flash_attn_func and flash_attn.flash_attn_varlen_func (also
exported by flash_attn.flash_attn_interface), patched when the user loaded flash_attn; backend
"flash_attn", library_version flash_attn.__version__, causal_align "bottom_right" (FlashAttention
>= 2.1), softcap as passed.

flash_attn_func: q [B, Sq, H, D], k, v [B, Sk, Hk, D] (layout "BSHD", Hk divides H).
window_size (left, right) other than (-1, -1) becomes the bool `mask` [1, 1, Sq, Sk] (key j
attended by query i iff i + Sk - Sq - left <= j <= i + Sk - Sq + right, -1 = unbounded);
alibi_slopes [H] or [B, H] the float32 `bias` the kernel adds: slope * j when causal
([1 | B, H, 1, Sk]; a row constant away from -slope * (i + Sk - Sq - j), as FlashAttention does
it), -slope * |i + Sk - Sq - j| otherwise ([1 | B, H, Sq, Sk]). With return_attn_probs,
`lse` [B, H, Sq].
flash_attn_varlen_func: a THD case, q [Tq, H, D], k, v [Tk, Hk, D], cu_seqlens_q / _k and
max_seqlen_q / _k as passed, `lse` [H, Tq] with return_attn_probs; window_size, alibi_slopes
and block_table (paged KV) have no THD form: such calls are not recorded (warning).
Untested against the real library (it needs CUDA): tests use a pure-torch stand-in.
"""
import sys

import torch

from . import compiled, hooks
from .spec import CallSpec, Unrecordable, library_attrs, make_packed

_NO_WINDOW = (-1, -1)


def _outputs(out) -> dict:
    """o, and lse when the call returned (out, softmax_lse, S_dmask)."""
    if isinstance(out, torch.Tensor):
        return {"o": out}
    return {"o": out[0], "lse": out[1]}


def _window_mask(left, right, sq, sk, device):
    """[1, 1, Sq, Sk] bool, True where query i may attend key j (bottom-right aligned)."""
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    keep = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if left >= 0:
        keep &= j >= i - left
    if right >= 0:
        keep &= j <= i + right
    return keep[None, None]


def _alibi_bias(slopes, causal, sq, sk):
    """[1 | B, H, 1 | Sq, Sk] float32: the ALiBi term FlashAttention adds to the scaled
    scores."""
    slopes = slopes.to(torch.float32)
    slopes = (slopes[None] if slopes.dim() == 1 else slopes)[:, :, None, None]  # [1|B, H, 1, 1]
    i = torch.arange(sq, device=slopes.device, dtype=torch.float32)[:, None] + (sk - sq)
    j = torch.arange(sk, device=slopes.device, dtype=torch.float32)[None, :]
    return slopes * j if causal else -slopes * (i - j).abs()


def _base(value, arguments, layout):
    """The spec both functions share: attributes, q, k, v, dropout."""
    q = value["q"]
    p, causal = float(arguments["dropout_p"] or 0.0), bool(arguments["causal"])
    scale = arguments["softmax_scale"]
    attrs = library_attrs(q, "flash_attn", sys.modules["flash_attn"].__version__, layout, scale)
    if causal:
        attrs.update(causal=True, causal_align="bottom_right")
    if arguments.get("softcap"):
        attrs["softcap"] = float(arguments["softcap"])
    if p:
        attrs["dropout_p"] = p
    tensors = {"q": q, "k": value["k"], "v": value["v"]}
    return CallSpec(tensors, attrs, (p, causal, scale, False), outputs=_outputs)


def read_flash_attn(value, arguments) -> CallSpec:
    """Hook reading of flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size,
    softcap, alibi_slopes, deterministic, return_attn_probs)."""
    q, k = value["q"], value["k"]
    if q.dim() != 4:
        raise Unrecordable("dims", f"q has {q.dim()} dimensions, not 4")
    spec = _base(value, arguments, "BSHD")
    sq, sk = q.shape[1], k.shape[1]
    window = tuple(arguments.get("window_size") or _NO_WINDOW)
    if window != _NO_WINDOW:
        spec.tensors["mask"] = _window_mask(*window, sq, sk, q.device)
    if arguments.get("alibi_slopes") is not None:
        spec.tensors["bias"] = _alibi_bias(arguments["alibi_slopes"], bool(arguments["causal"]),
                                           sq, sk)
    return spec


def read_flash_attn_varlen(value, arguments) -> CallSpec:
    """Hook reading of flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal, ...)."""
    q = value["q"]
    if q.dim() != 3:
        raise Unrecordable("dims", f"q has {q.dim()} dimensions, not 3")
    given = {"window_size": tuple(arguments.get("window_size") or _NO_WINDOW) != _NO_WINDOW,
             "alibi_slopes": arguments.get("alibi_slopes") is not None,
             "block_table": arguments.get("block_table") is not None}
    unsupported = [name for name, set_ in given.items() if set_]
    if unsupported:
        raise Unrecordable(unsupported[0], f"{unsupported[0]} is set: packed cases have no form "
                                           "for it")
    spec = _base(value, arguments, "THD")
    make_packed(spec, arguments["cu_seqlens_q"], arguments["cu_seqlens_k"],
                arguments["max_seqlen_q"], arguments["max_seqlen_k"])
    return spec


_INTERFACE = "flash_attn.flash_attn_interface"
FLASH_ATTN_HOOKS = (
    hooks.Hook("flash_attn_func", (("flash_attn", "flash_attn_func"),
                                   (_INTERFACE, "flash_attn_func")),
               read_flash_attn, compiled.uncaptured),
    hooks.Hook("flash_attn_varlen_func", (("flash_attn", "flash_attn_varlen_func"),
                                          (_INTERFACE, "flash_attn_varlen_func")),
               read_flash_attn_varlen, compiled.uncaptured),
)
