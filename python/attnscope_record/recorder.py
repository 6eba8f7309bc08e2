"""Recorder: patches torch.nn.functional.scaled_dot_product_attention (and wraps functions
decorated with @attention) while active, and writes the selected calls of each step.

Usage forms: `with rec.step(n): ...` (one training step), `@rec` on a step function (each call
is a step), `with rec: ... rec.next_step()`. A step's calls are written when the step ends,
after backward has delivered dO, dQ, dK, dV; backward must therefore run inside the step.
Nothing the recorder does may break the user's step: its own failures warn and stop recording.
"""
import contextlib
import functools
import inspect
import sys

import torch
import torch.nn.functional as F

from .capture import PendingCall, warn
from .selection import CallInfo, Selection
from .writer import DumpWriter, RecordingError, host_array

# SDPA's signature (the builtin has no inspectable one); user functions use their own.
SDPA_SIGNATURE = inspect.Signature([
    inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
    for n, d in (("query", inspect.Parameter.empty), ("key", inspect.Parameter.empty),
                 ("value", inspect.Parameter.empty), ("attn_mask", None), ("dropout_p", 0.0),
                 ("is_causal", False))
] + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d)
     for n, d in (("scale", None), ("enable_gqa", False))])

# Parameter names accepted for each SDPA argument in a registered attention function.
ALIASES = {
    "q": ("query", "q"), "k": ("key", "k"), "v": ("value", "v"),
    "attn_mask": ("attn_mask", "mask", "attention_mask"), "dropout_p": ("dropout_p", "dropout"),
    "is_causal": ("is_causal", "causal"), "scale": ("scale", "softmax_scale"),
    "enable_gqa": ("enable_gqa",),
}

_active = None  # the Recorder whose calls are being recorded, if any
_sdpa_original = None


def _make_wrapper(original, signature, function_name):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        rec = _active
        if rec is None or not rec._live:
            return original(*args, **kwargs)
        return rec._record_call(original, signature, function_name, args, kwargs)

    wrapper.__attnscope_original__ = original
    return wrapper


def attention(fn):
    """Decorator for a user attention function with an SDPA-like signature (q, k, v, attn_mask,
    is_causal, scale, ... under the names in ALIASES). Inert unless a Recorder is active."""
    return _make_wrapper(fn, inspect.signature(fn), getattr(fn, "__qualname__", fn.__name__))


class Recorder:
    """Records selected attention calls into an attnscope dump (HDF5, schema 1).

    path: dump file (created at the first write, truncated if it exists).
    steps, layers: None (all), an int, ints, or callable(int) -> bool; layer = index of the
      attention call within the step. names: fnmatch globs on the calling module's name (needs
      model=). when: None, "nonfinite" (output or a gradient has NaN/Inf) or callable(call).
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
        self._calls = 0
        self._pending = []
        self._depth = 0
        self._live = False
        self._inside = False
        self._warned_backward = False

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
        self._calls = 0
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

    # --- one call ---------------------------------------------------------------------------
    def _record_call(self, original, signature, function_name, args, kwargs):
        if self._inside:  # SDPA inside a registered attention function is part of that call
            return original(*args, **kwargs)
        self._inside = True
        try:
            try:
                prepared = self._prepare(signature, function_name, args, kwargs)
            except Exception as error:  # the recorder's own failure must not break the step
                self._stop(f"cannot record a call of {function_name}: {error!r}")
                prepared = None
            if prepared is None:
                return original(*args, **kwargs)
            pending, args, kwargs = prepared
            out = original(*args, **kwargs)
            try:
                pending.watch_output(out if isinstance(out, torch.Tensor) else out[0])
                self._pending.append(pending)
            except Exception as error:
                self._stop(f"cannot record the output of {function_name}: {error!r}")
            return out
        finally:
            self._inside = False

    def _prepare(self, signature, function_name, args, kwargs):
        layer = self._calls
        self._calls += 1
        name = self._module_name() if self._module_names else function_name
        info = CallInfo(self._step, layer, name, function_name)
        if not self.selection.selects_call(info):
            return None
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        found = {}
        for key, names in ALIASES.items():
            found[key] = next((n for n in names if n in bound.arguments), None)
        value = {k: (bound.arguments[n] if n else None) for k, n in found.items()}
        q, k, v = value["q"], value["k"], value["v"]
        if not all(isinstance(t, torch.Tensor) for t in (q, k, v)) or not 2 <= q.dim() <= 4:
            raise RecordingError(f"{function_name} got q, k, v that are not 2-D to 4-D tensors")
        pending = PendingCall(info, q, k, v, value["attn_mask"], value["dropout_p"],
                              value["is_causal"], value["scale"], value["enable_gqa"])
        for key, t in zip(("q", "k", "v"), pending.hooked_inputs(q, k, v)):
            bound.arguments[found[key]] = t
        return pending, bound.args, bound.kwargs

    def _module_name(self):
        frame = sys._getframe(4)
        while frame is not None:
            owner = frame.f_locals.get("self")
            if owner is not None and id(owner) in self._module_names:
                return self._module_names[id(owner)]
            frame = frame.f_back
        return ""

    # --- end of step: decide and write ------------------------------------------------------
    def _end_step(self):
        pending, self._pending = self._pending, []
        if any(call.missed_backward() for call in pending) and not self._warned_backward:
            self._warned_backward = True
            warn(f"step {pending[0].info.step} ended before backward reached its attention "
                 "calls: their do, dq, dk, dv are not recorded; hint: run loss.backward() "
                 "inside `with rec.step(...)`")
        for call in pending:
            if self.stopped is not None:
                break
            try:
                changed = call.modified_in_place()
                if changed:
                    warn(f"step {call.info.step} call {call.info.layer}: {', '.join(changed)} "
                         "changed in place after the call; the call is not written")
                    continue
                if not self.selection.keeps(call):
                    continue
                arrays = {n: host_array(t) for n, t in call.tensors.items()}
                self.written.append(
                    self._writer.write(call.info.step, call.info.layer, arrays, call.attrs))
            except RecordingError as error:
                self._stop(str(error))
            except Exception as error:
                self._stop(f"cannot write step {call.info.step} call {call.info.layer} to "
                           f"{self.path}: {error!r}")
