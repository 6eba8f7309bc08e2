"""Recorder: patches torch.nn.functional.scaled_dot_product_attention (and wraps functions
decorated with @attention) while active, and writes the selected calls of each step.

Usage forms: `with rec.step(n): ...` (one training step), `@rec` on a step function (each call
is a step), `with rec: ... rec.next_step()`. A step's calls are written when the step ends,
after backward has delivered dO, dQ, dK, dV; backward must therefore run inside the step.
Nothing the recorder does may break the user's step: its own failures warn and stop recording.

Within a step: a call made while autograd's backward runs is a gradient-checkpointing
recomputation; it is matched to its original call, which gets its gradients, and is never a
case of its own. A forward call after backward has delivered gradients for calls of the step
starts the next micro-batch (gradient accumulation).
"""
import contextlib
import functools
import inspect
import sys

import torch
import torch.nn.functional as F

from . import dropout
from .arguments import SDPA_SIGNATURE, bind
from .capture import PendingCall, warn
from .finish import case_contents
from .selection import CallInfo, Selection
from .semantics import CUSTOM_BACKEND, sdpa_backend
from .writer import DumpWriter, RecordingError, group_path

_active = None  # the Recorder whose calls are being recorded, if any
_sdpa_original = None


def _in_backward() -> bool:
    """Whether autograd's engine is running a backward pass on this thread."""
    return torch._C._current_graph_task_id() != -1


def _make_wrapper(original, signature, function_name):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        rec = _active
        if rec is None or not rec._live:
            return original(*args, **kwargs)
        return rec._record_call(original, signature, function_name, args, kwargs,
                                sys._getframe(1))

    wrapper.__attnscope_original__ = original
    return wrapper


def attention(fn):
    """Decorator for a user attention function with an SDPA-like signature (q, k, v, attn_mask,
    is_causal, scale, ... under the names in arguments.ALIASES). Inert unless a Recorder is
    active."""
    return _make_wrapper(fn, inspect.signature(fn), getattr(fn, "__qualname__", fn.__name__))


class Recorder:
    """Records selected attention calls into an attnscope dump (HDF5, schema 1.1).

    path: dump file (created at the first write, truncated if it exists).
    steps, layers: None (all), an int, ints, or callable(int) -> bool; layer = index of the
      attention call within its micro-batch (within the step when there is one). names:
      fnmatch globs on the calling module's name (needs model=). when: None, "nonfinite"
      (output or a gradient has NaN/Inf) or callable(call).
    budget_mb: bound on the file size; the case that would cross it stops the recording.
    model: an nn.Module whose submodule names label the calls ("encoder.layer.3.attention").
    """

    def __init__(self, path, steps=None, layers=None, names=None, when=None, budget_mb=1024.0,
                 model=None):
        self.selection = Selection(steps, layers, names, when)
        self._writer = DumpWriter(path, budget_mb * 2**20)
        self._module_names = {}
        if model is not None:
            self._module_names = {id(m): n for n, m in model.named_modules() if n}
        self.path = self._writer.path
        self.written = []
        self.stopped = None
        self._step = 0
        self._next_auto_step = 0
        self._pending = []
        self._depth = 0
        self._live = False
        self._inside = False
        self._warned_backward = False
        self._warned_no_call = False
        self._generation = 0  # changes with every step; hooks of older steps are ignored
        self._reset_counters(begun=False)

    def _reset_counters(self, begun):
        self._begun = begun  # started by step() / next_step(), so a step without calls warns
        self._calls = 0  # forward calls of the step so far
        self._micro = 0  # current micro-batch
        self._layer = 0  # forward calls of the current micro-batch so far
        self._backward_seen = False  # backward delivered gradients in the current micro-batch

    # --- activation -------------------------------------------------------------------------
    def __enter__(self):
        self._activate()
        return self

    def __exit__(self, *exc):
        self._end_step()
        self._deactivate()
        return False

    @contextlib.contextmanager
    def step(self, number=None):
        """One training step (forward and backward); `number` defaults to the last step + 1."""
        self._end_step()
        self._begin_step(number)
        self._activate()
        try:
            yield self
        finally:
            self._end_step()
            self._deactivate()

    def __call__(self, fn):
        """Decorator: every call of fn is one step."""
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.step():
                return fn(*args, **kwargs)

        return wrapped

    def next_step(self, number=None):
        """Ends the current step (writes its calls) and starts the next one."""
        self._end_step()
        self._begin_step(number)

    def close(self):
        self._end_step()
        while self._depth:
            self._deactivate()

    def _begin_step(self, number):
        self._step = self._next_auto_step if number is None else int(number)
        self._next_auto_step = self._step + 1
        self._generation += 1
        self._reset_counters(begun=True)
        self._update_live()

    def _activate(self):
        global _active, _sdpa_original
        if _active is not None and _active is not self:
            warn(f"another Recorder ({_active.path}) is active; {self.path} records nothing "
                 "inside it")
            return
        if self._depth == 0:
            _active = self
            _sdpa_original = F.scaled_dot_product_attention
            F.scaled_dot_product_attention = _make_wrapper(
                _sdpa_original, SDPA_SIGNATURE, "scaled_dot_product_attention")
        self._depth += 1
        self._update_live()

    def _deactivate(self):
        global _active, _sdpa_original
        if _active is not self or self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            F.scaled_dot_product_attention = _sdpa_original
            _active, _sdpa_original = None, None
        self._update_live()

    def _update_live(self):
        self._live = (self._depth > 0 and self.stopped is None
                      and self.selection.selects_step(self._step))

    def _stop(self, message):
        if self.stopped is None:
            self.stopped = message
            warn(message + " -- recording stopped, the training step goes on")
        self._pending.clear()
        self._update_live()

    def _gradient_callback(self):
        """Marks that backward reached this step's calls (ignored once the step is over)."""
        generation = self._generation

        def seen(*_):
            if generation == self._generation:
                self._backward_seen = True

        return seen

    # --- one call ---------------------------------------------------------------------------
    def _record_call(self, original, signature, function_name, args, kwargs, caller):
        if self._inside:  # SDPA inside a registered attention function is part of that call
            return original(*args, **kwargs)
        self._inside = True
        try:
            if _in_backward():
                return self._recomputed_call(original, signature, function_name, args, kwargs,
                                             caller)
            return self._forward_call(original, signature, function_name, args, kwargs,
                                      caller)
        finally:
            self._inside = False

    def _forward_call(self, original, signature, function_name, args, kwargs, caller):
        if self._backward_seen:  # gradient accumulation: the next micro-batch begins
            self._micro += 1
            self._layer = 0
            self._backward_seen = False
        try:
            pending, args, kwargs = self._prepare(signature, function_name, args, kwargs, caller)
        except Exception as error:  # the recorder's own failure must not break the step
            self._stop(f"cannot record a call of {function_name}: {error!r}")
            pending = None
        out = original(*args, **kwargs)
        try:
            o = out if isinstance(out, torch.Tensor) else out[0]
            if pending is None:
                if o.requires_grad:
                    o.register_hook(self._gradient_callback())
            else:
                pending.watch_output(o)
                self._pending.append(pending)
        except Exception as error:
            self._stop(f"cannot record the output of {function_name}: {error!r}")
        return out

    def _prepare(self, signature, function_name, args, kwargs, caller):
        """(PendingCall or None when not selected, args, kwargs to call the original with)."""
        info = CallInfo(self._step, self._layer, self._call_name(function_name, caller),
                        function_name, self._micro, self._calls)
        self._calls += 1
        self._layer += 1
        if not self.selection.selects_call(info):
            return None, args, kwargs
        bound, found, value = bind(signature, function_name, args, kwargs)
        q, k, v = value["q"], value["k"], value["v"]
        is_sdpa = signature is SDPA_SIGNATURE
        call_args = (value["attn_mask"], value["dropout_p"] or 0.0, value["is_causal"],
                     value["scale"], value["enable_gqa"])
        backend = sdpa_backend(q, k, v, *call_args) if is_sdpa else CUSTOM_BACKEND
        pending = PendingCall(info, q, k, v, *call_args, backend, self._gradient_callback())
        for key, t in zip(("q", "k", "v"), pending.hooked_inputs(q, k, v)):
            bound.arguments[found[key]] = t
        if pending.sdpa_args[0] > 0 and backend == "sdpa_math":
            pending.rng_state = dropout.rng_state(q.device)  # nothing draws before the call
        return pending, bound.args, bound.kwargs

    def _recomputed_call(self, original, signature, function_name, args, kwargs, caller):
        """A call made during backward: gradient checkpointing recomputing a forward call.
        With use_reentrant=True the gradients flow through this recomputation (the original
        ran under no_grad), with use_reentrant=False through the original graph; either way
        they reach the original call. Unmatched recomputations (calls not selected) pass."""
        self._backward_seen = True
        call = None
        try:
            if self._pending:
                bound, found, value = bind(signature, function_name, args, kwargs)
                name = self._call_name(function_name, caller)
                call = self._original_of(function_name, name, value["q"], value["k"],
                                         value["v"])
        except (RecordingError, TypeError):  # arguments no selected call could have had
            call = None
        except Exception as error:
            self._stop(f"cannot match a recomputed call of {function_name}: {error!r}")
            call = None
        if call is None:
            return original(*args, **kwargs)
        for key, t in zip(("q", "k", "v"), call.hooked_inputs(value["q"], value["k"],
                                                                 value["v"])):
            bound.arguments[found[key]] = t
        out = original(*bound.args, **bound.kwargs)
        try:
            call.watch_recomputed_output(out if isinstance(out, torch.Tensor) else out[0])
        except Exception as error:
            self._stop(f"cannot record the recomputed output of {function_name}: {error!r}")
        return out

    def _original_of(self, function_name, name, q, k, v):
        """The step's call that (q, k, v) recompute, else None. Backward recomputes the latest
        calls first, so candidates are tried least recomputed (a retained graph may be
        recomputed twice), then latest first: usually the first one compared matches."""
        order = sorted(self._pending, key=lambda c: (c.recomputed, -c.info.call_index))
        call = next((c for c in order if c.recomputes(function_name, name, q, k, v)), None)
        if call is not None:
            call.recomputed += 1
        return call

    def _call_name(self, function_name, frame):
        """The calling module's name (innermost `self` that is a submodule of `model`)."""
        if not self._module_names:
            return function_name
        while frame is not None:
            owner = frame.f_locals.get("self")
            if owner is not None and id(owner) in self._module_names:
                return self._module_names[id(owner)]
            frame = frame.f_back
        return ""

    # --- end of step: decide and write ------------------------------------------------------
    def _end_step(self):
        pending, self._pending = self._pending, []
        several = self._micro > 0
        if self._begun and self._live and self._calls == 0 and not self._warned_no_call:
            self._warned_no_call = True
            warn(f"step {self._step} made no attention call the recorder sees: the model "
                 "probably uses eager attention (matmul + softmax); hint: load it with "
                 "attn_implementation=\"sdpa\" or decorate its attention function with "
                 "@attnscope_record.attention")
        self._begun = False
        if any(call.missed_backward() for call in pending) and not self._warned_backward:
            self._warned_backward = True
            warn(f"step {pending[0].info.step} ended before backward reached its attention "
                 "calls: their do, dq, dk, dv are not recorded; hint: run loss.backward() "
                 "inside `with rec.step(...)`")
        for call in pending:
            if self.stopped is not None:
                break
            info = call.info
            where = group_path(info.step, info.layer, info.micro_batch if several else None)
            try:
                changed = call.modified_in_place()
                if changed:
                    warn(f"step {info.step} call {info.call_index}: {', '.join(changed)} "
                         "changed in place after the call; the call is not written")
                    continue
                if not self.selection.keeps(call):
                    continue
                arrays, attrs = case_contents(call, where, self._writer)
                self.written.append(self._writer.write(where, arrays, attrs))
            except RecordingError as error:
                self._stop(str(error))
            except Exception as error:
                self._stop(f"cannot write step {info.step} call {info.call_index} to "
                           f"{self.path}: {error!r}")
