"""Capture under torch.compile. Recording in Python would be traced by Dynamo (hooks, side
effects: graph breaks, or nothing recorded), so while Dynamo traces, the wrappers (hooks.py)
take one of two routes:

- `taps` (SDPA, @attention functions): the call stays in the graph and is compiled as usual,
  between opaque custom ops. attnscope::call_begin(q, k, v, mask, ...) returns copies of q, k, v
  and the call's token (int64 [], 0 = not recorded); attnscope::call_end(o, token) a copy of o.
  At run time they hand the active Recorder copies of q, k, v, mask and o (Inductor reuses
  buffers: references would not stay valid). Their backward formulas pass dO, dQ, dK, dV
  through attnscope::gradients, which hands copies to the Recorder. What is recorded is what
  the compiled graph computed.
- `uncaptured` (other hooks; calls the taps cannot take): the call is compiled unrecorded and
  the Recorder warns once, when Dynamo traces it.

Not covered: module names (names= selects nothing: compiled code has no module frames),
gradient checkpointing inside the compiled region (its recomputed calls are not matched), and
dropout replay (the compiled graph draws its own mask).
"""
import itertools
import weakref
from typing import Optional

import torch
from torch import Tensor

from . import hooks
from .arguments import bind, has_qkv
from .spec import read_custom, sdpa_like

_calls = weakref.WeakValueDictionary()  # token -> PendingCall of the running step
_tokens = itertools.count(1)
_tracing = 0  # taps() being traced: SDPA inside an @attention function is part of its call


@torch.library.custom_op("attnscope::call_begin", mutates_args=())
def call_begin(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor], dropout_p: float,
               is_causal: bool, scale: Optional[float], enable_gqa: bool, function: str,
               custom: bool, needs_grad: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Copies of q, k, v and the token of the call (recorded when a Recorder selects it)."""
    token = 0
    rec = hooks.active
    if rec is not None:
        def read():
            value = {"q": q.clone(), "k": k.clone(), "v": v.clone(), "dropout_p": dropout_p,
                     "attn_mask": None if attn_mask is None else attn_mask.clone(),
                     "is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa}
            return sdpa_like(value, custom)

        call = rec._compiled_call(function, read)
        if call is not None:
            call.expects_backward = needs_grad
            token = next(_tokens)
            _calls[token] = call
    return q.clone(), k.clone(), v.clone(), torch.tensor(token, dtype=torch.int64)


@call_begin.register_fake
def _(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, function, custom,
      needs_grad):
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            torch.empty((), dtype=torch.int64))


@torch.library.custom_op("attnscope::call_end", mutates_args=())
def call_end(o: Tensor, token: Tensor) -> Tensor:
    """A copy of o, the output of the call of `token`."""
    call = _calls.get(int(token))
    if call is not None:
        call.keep("o", o.clone())
    return o.clone()


@call_end.register_fake
def _(o, token):
    return torch.empty_like(o)


@torch.library.custom_op("attnscope::gradients", mutates_args=())
def gradients(token: Tensor, names: str, grads: list[Tensor]) -> list[Tensor]:
    """Copies of grads, the gradients `names` ("dq,dk,dv" or "do") of the call of `token`."""
    call = _calls.get(int(token))
    if call is not None:
        for name, grad in zip(names.split(","), grads):
            call.receive(name, grad.clone())
    return [grad.clone() for grad in grads]


@gradients.register_fake
def _(token, names, grads):
    return [torch.empty_like(grad) for grad in grads]


def _through_gradients(token, grads: dict):
    """grads (name -> gradient or None) as they leave attnscope::gradients."""
    names = [n for n, g in grads.items() if g is not None]
    passed = iter(gradients(token, ",".join(names), [grads[n] for n in names]))
    return [None if g is None else next(passed) for g in grads.values()]


def _begin_context(ctx, inputs, output):
    ctx.save_for_backward(output[3])


def _begin_backward(ctx, dq, dk, dv, _):
    (token,) = ctx.saved_tensors
    return (*_through_gradients(token, {"dq": dq, "dk": dk, "dv": dv}),) + (None,) * 8


def _end_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def _end_backward(ctx, do):
    (token,) = ctx.saved_tensors
    return _through_gradients(token, {"do": do})[0], None


call_begin.register_autograd(_begin_backward, setup_context=_begin_context)
call_end.register_autograd(_end_backward, setup_context=_end_context)


def _untappable(value) -> Optional[str]:
    """Why the taps cannot take a call with bind()'s `value`, or None."""
    if not has_qkv(value):
        return "q, k, v are not tensors"
    mask = value["attn_mask"]
    if mask is not None and not isinstance(mask, Tensor):
        return "its attn_mask is not a tensor"
    tensors = [value["q"], value["k"], value["v"]] + ([] if mask is None else [mask])
    if any(type(t) not in (Tensor, torch.nn.Parameter) or t.is_nested for t in tensors):
        return "tensor subclasses and nested tensors are not taken"
    if mask is not None and mask.requires_grad:
        return "its attn_mask requires grad"
    if not all(isinstance(value[n], (bool, int, float, type(None)))
               for n in ("dropout_p", "is_causal", "scale", "enable_gqa")):
        return "dropout_p, is_causal, scale or enable_gqa is not a Python number"
    return None


def taps(fn, args, kwargs):
    """Route of SDPA-like hooks (fn: hooks.Function) while Dynamo traces."""
    global _tracing
    if _tracing:
        return fn.original(*args, **kwargs)
    bound, found, value = bind(fn.signature, args, kwargs)
    reason = _untappable(value)
    if reason is not None:
        return uncaptured(fn, args, kwargs, reason)
    q, k, v = value["q"], value["k"], value["v"]
    needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad
                                              or v.requires_grad)
    scale = None if value["scale"] is None else float(value["scale"])
    *copies, token = call_begin(q, k, v, value["attn_mask"], float(value["dropout_p"] or 0.0),
                                bool(value["is_causal"]), scale, bool(value["enable_gqa"]),
                                fn.hook.name, fn.hook.read is read_custom, needs_grad)
    for key, t in zip(("q", "k", "v"), copies):
        bound.arguments[found[key]] = t
    _tracing += 1
    try:
        out = fn.original(*bound.args, **bound.kwargs)
    finally:
        _tracing -= 1
    if isinstance(out, Tensor):
        return call_end(out, token)
    return (call_end(out[0], token), *out[1:])


def uncaptured(fn, args, kwargs, reason="the recorder captures only SDPA and @attention "
               "functions in compiled code; call it outside the compiled region to record it"):
    """Route of the other hooks while Dynamo traces: the call, unrecorded."""
    _warn_uncaptured(fn.hook.name, reason)
    return fn.original(*args, **kwargs)


@torch.compiler.assume_constant_result
def _warn_uncaptured(name: str, reason: str) -> bool:
    """Runs while Dynamo traces (it keeps the result, not the call): the active Recorder warns
    once per function."""
    if hooks.active is not None:
        hooks.active._warn_once(("uncaptured", name),
                                f"{name} called under torch.compile is not recorded: {reason}")
    return True
