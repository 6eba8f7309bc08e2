"""Dropout replay: regenerate the keep-mask an SDPA call drew, from the RNG state saved just
before the call, and trust it only once it reproduces the recorded output.

The MATH backend applies at::dropout to the attention probabilities attn [..., H, Sq, Sk],
which on CPU is `empty_like(attn).bernoulli_(1 - p)` on a float32 attn (the math path upcasts
fp16/bf16), so replaying that draw from the saved state gives the same mask. On CUDA the same
draw is tried and kept only if it verifies (untested here: no GPU). Other backends draw inside
their kernels (CUDA flash: Philox; xformers, flash_attn too), and so do compiled graphs; those
and custom functions are "unavailable". The user's RNG state is put back after the draw:
training randomness is untouched.
"""
import contextlib

import torch

from .semantics import CUSTOM_BACKEND, UNKNOWN_BACKEND, autocast_dtype


def rng_state(device: torch.device):
    """State of the default generator that SDPA's dropout on `device` draws from, or None."""
    if device.type == "cpu":
        return torch.get_rng_state()
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    return None


def _set_rng_state(device, state):
    if device.type == "cpu":
        torch.set_rng_state(state)
    else:
        torch.cuda.set_rng_state(state, device)


@contextlib.contextmanager
def _rng_state_at(device, state):
    current = rng_state(device)
    _set_rng_state(device, state)
    try:
        yield
    finally:
        _set_rng_state(device, current)


def keep_mask_shape(q, k, enable_gqa):
    """Shape of attn = q k^T: broadcast batch dims (k's heads repeated to q's under GQA), then
    [Sq, Sk]."""
    k_batch = list(k.shape[:-2])
    if enable_gqa and k_batch:
        k_batch[-1] = q.shape[-3]
    return tuple(torch.broadcast_shapes(q.shape[:-2], tuple(k_batch))) + (q.shape[-2],
                                                                          k.shape[-2])


def unavailable_reason(backend, state, tensors, compiled=False):
    """Why this call's keep-mask cannot be regenerated, or None when it can be tried."""
    if compiled:
        return "the call ran in a torch.compile graph, which draws its dropout mask its own way"
    if backend == CUSTOM_BACKEND:
        return "custom attention function: its dropout draws are not known to the recorder"
    if backend == UNKNOWN_BACKEND:
        return "the SDPA backend that ran is unknown"
    if backend != "sdpa_math":
        return (f"{backend} draws its dropout mask inside the kernel; only sdpa_math's mask can "
                "be regenerated")
    if state is None:
        return "the RNG state of this device type is not saved by the recorder"
    if "o" not in tensors:
        return "no recorded output to verify a regenerated mask against"
    return None


def _tolerance(o):
    """Rounding-level bound on |recomputed - o|: the recomputation applies the mask in another
    order (masked_fill then scaling instead of a multiply by noise / (1 - p))."""
    finite = o[torch.isfinite(o)]
    top = float(finite.abs().max()) if finite.numel() else 0.0
    return max(4 * torch.finfo(o.dtype).eps, 1e-5) * max(1.0, top)


def replay(tensors, attn_mask, args, state):
    """(keep, None) with keep a bool tensor [..., H, Sq, Sk] (True = kept) that reproduces the
    recorded o, or (None, reason). tensors: the call's q, k, v, o; attn_mask as passed to SDPA;
    args: (dropout_p, is_causal, scale, enable_gqa)."""
    p, is_causal, scale, enable_gqa = args
    q, k, v, o = (tensors[n] for n in ("q", "k", "v", "o"))
    target = autocast_dtype(q)
    cast = [t.to(target) if target is not None and t is not None and t.is_floating_point()
            else t for t in (q, k, v, attn_mask)]
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # SDPA turns a bool mask into an additive one before its MATH backend; called
        # directly, the MATH op would add the bools as numbers.
        dtype = cast[0].dtype
        cast[3] = torch.zeros(attn_mask.shape, dtype=dtype, device=attn_mask.device).masked_fill(
            ~attn_mask, float("-inf"))
    with torch.no_grad(), torch.autocast(q.device.type, enabled=False):
        with _rng_state_at(q.device, state):
            keep = torch.empty(keep_mask_shape(q, k, enable_gqa), dtype=torch.float32,
                               device=q.device).bernoulli_(1 - p).bool()
        again = torch.ops.aten._scaled_dot_product_attention_math(
            *cast, p, is_causal, dropout_mask=keep, scale=scale, enable_gqa=enable_gqa)[0]
    if again.shape != o.shape:
        return None, f"the recomputed output has shape {tuple(again.shape)}, not {tuple(o.shape)}"
    tol = _tolerance(o)
    bad = ~torch.isclose(again.to(o.dtype), o, rtol=0, atol=tol, equal_nan=True)
    if bool(bad.any()):
        return None, (f"the regenerated mask does not reproduce the recorded output "
                      f"({int(bad.sum())} of {bad.numel()} elements differ by more than "
                      f"{tol:.3g})")
    return keep, None
