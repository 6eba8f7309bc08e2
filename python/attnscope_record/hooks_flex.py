"""FlexAttention hook: torch.nn.attention.flex_attention.flex_attention, recorded like SDPA
(layout BHSD, backend "flex"), and `flex_attention`, the same wrapper for code that keeps its
own reference to torch's function.

The block_mask becomes the bool `mask` [B|1, H|1, Sq, Sk] (True = attend): its mask_mod on the
full index grid, as flex's eager path applies it. The score_mod is kept as source text
(`score_mod`) and replayed when it has the form attnscope's kernels compute, s -> cap *
tanh(s / cap) (`softcap`) then + `bias` (-inf allowed, so a causal -inf is part of it): it is
evaluated on the full [B, H, Sq, Sk] grid in flex's score precision (float32, float64 for
float64 q) with zeros, random scores and scores at 1e4. score_mod(s) - s the same for all →
bias = score_mod(0); else cap = score_mod(1e4) - score_mod(0), checked on the random scores.
`score_mod_replay` says what came of it ("none", "bias", "softcap", "softcap+bias" or
"unavailable" with `score_mod_note`). All of it is read when the call is made: a closure's
tensors may change later.

Under torch.compile the call is compiled (Inductor's fused kernel) unrecorded, with a warning.
"""
import inspect
import textwrap

import torch
import torch.nn.attention.flex_attention as flex_module

from . import compiled, hooks
from .spec import CallSpec, Unrecordable, library_attrs, score_dtype

# A score deep in tanh's saturation: cap * tanh(1e4 / cap) == cap in float32 for caps <= 1e3.
SATURATING_SCORE = 1e4


def _grid(fn, shape, device):
    """fn(b, h, m, n) for every index of `shape` [B, H, Sq, Sk] (flex's own vmap)."""
    return flex_module.create_mask(lambda b, h, m, n: fn(b, h, m, n), *shape, device)


def _collapsed(t):
    """t [B, H, Sq, Sk] with dims 0 and 1 cut to 1 where t does not vary along them."""
    for dim in (0, 1):
        first = t.narrow(dim, 0, 1)
        if t.shape[dim] > 1 and bool((t == first).all()):
            t = first
    return t


def _source(fn) -> str:
    try:
        return textwrap.dedent(inspect.getsource(fn)).strip()
    except (OSError, TypeError):
        return repr(fn)


def _read_score_mod(score_mod, shape, dtype, device):
    """(score_mod_replay, note or None, softcap (0 = off), bias [B, H, Sq, Sk] or None)."""
    generator = torch.Generator(device=device).manual_seed(0)
    scores = {"zero": torch.zeros(shape, dtype=dtype, device=device),
              "random": 8 * torch.randn(shape, generator=generator, dtype=dtype, device=device),
              "saturating": torch.full(shape, SATURATING_SCORE, dtype=dtype, device=device)}
    try:
        out = {n: _grid(lambda b, h, m, n, s=s: score_mod(s[b, h, m, n], b, h, m, n), shape,
                        device) for n, s in scores.items()}
    except Exception as error:
        return ("unavailable", f"evaluating it on the [B, H, Sq, Sk] grid failed: {error!r}",
                0.0, None)
    masked = torch.isneginf(out["zero"])
    if not all(torch.equal(masked, torch.isneginf(o)) for o in out.values()):
        return "unavailable", "where it gives -inf depends on the score", 0.0, None
    kept = {n: o[~masked] for n, o in out.items()}
    if not all(bool(torch.isfinite(o).all()) for o in kept.values()):
        return "unavailable", "it gives NaN or +inf", 0.0, None
    tol = 64 * torch.finfo(dtype).eps
    atol = tol * (1 + float(scores["random"].abs().max()))  # rounding of score_mod(s) - s
    random = scores["random"][~masked]

    def close(a, b):
        return torch.allclose(a, b, rtol=tol, atol=atol)

    if close(kept["random"] - random, kept["zero"]):
        return "bias", None, 0.0, out["zero"]
    cap = kept["saturating"] - kept["zero"]
    c = float(cap[0])
    if c > 0 and close(cap, torch.full_like(cap, c)) and close(
            kept["random"] - kept["zero"], c * torch.tanh(random / c)):
        return "softcap", None, c, out["zero"]
    return "unavailable", "score_mod(s) - s depends on s and is not cap * tanh(s / cap) + bias", \
        0.0, None


def read_flex(value, arguments) -> CallSpec:
    """Hook reading of flex_attention(query, key, value, score_mod, block_mask, scale,
    enable_gqa, ...): q [B, H, Sq, D], k [B, Hk, Sk, D], v [B, Hk, Sk, Dv], Hk divides H."""
    q, k = value["q"], value["k"]
    if q.dim() != 4:
        raise Unrecordable("dims", f"q has {q.dim()} dimensions, not 4")
    shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    attrs = library_attrs(q, "flex", torch.__version__, "BHSD", arguments["scale"],
                          follows_autocast=True)
    attrs["enable_gqa"] = bool(arguments["enable_gqa"])
    tensors = {"q": q, "k": k, "v": value["v"]}
    block_mask, score_mod = arguments["block_mask"], arguments["score_mod"]
    warning = None
    with torch.no_grad():
        if block_mask is not None:
            mask = _collapsed(_grid(block_mask.mask_mod, shape, q.device))
            if not bool(mask.all()):
                tensors["mask"] = mask
        if score_mod is None:
            attrs["score_mod_replay"] = "none"
        else:
            attrs["score_mod"] = _source(score_mod)
            replay, note, softcap, bias = _read_score_mod(score_mod, shape, score_dtype(q),
                                                          q.device)
            if softcap:
                attrs["softcap"] = softcap
            if bias is not None and bool((bias != 0).any()):
                tensors["bias"] = _collapsed(bias)
                replay = "softcap+bias" if softcap else "bias"
            attrs["score_mod_replay"] = replay
            if note is not None:
                attrs["score_mod_note"] = note
                warning = (("score_mod",), f"flex_attention: score_mod "
                           f"{getattr(score_mod, '__qualname__', score_mod)!s} cannot be "
                           f"replayed: {note} (recorded with score_mod_replay=\"unavailable\")")
    return CallSpec(tensors, attrs, warning=warning)


def _compiled(fn, args, kwargs):
    return compiled.uncaptured(fn, args, kwargs, "FlexAttention compiles into its own fused "
                               "kernel; call it outside the compiled region to record it")


FLEX_HOOK = hooks.Hook("flex_attention", (("torch.nn.attention.flex_attention",
                                           "flex_attention"),), read_flex, _compiled)

# Drop-in for torch's flex_attention, recorded while a Recorder is active (torch's otherwise).
flex_attention = hooks.wrap(FLEX_HOOK, flex_module.flex_attention)
