"""Recorder: while active, patches the hooked attention functions (hooks.py: SDPA, FlexAttention,
xformers and FlashAttention when loaded; functions decorated with @attention are wrapped for
good) and writes the selected calls of each step.

Usage forms: `with rec.step(n): ...` (one training step), `@rec` on a step function (each call
is a step), `with rec: ... rec.next_step()`. A step's calls are written when the step ends,
after backward has delivered dO, dQ, dK, dV; backward must therefore run inside the step.
Nothing the recorder does may break the user's step: its own failures warn and stop recording.

Within a step: a call made while autograd's backward runs is a gradient-checkpointing
recomputation; it is matched to its original call, which gets its gradients, and is never a
case of its own. A forward call after backward has delivered gradients for calls of the step
starts the next micro-batch (gradient accumulation). Calls made by torch.compile'd code reach
the recorder through compiled.py's custom ops (_compiled_call).

Under torch.distributed (distributed.py), checked at the first write: each rank writes its own
file FOLDER/rank_{R:05d}.h5 in the run folder FOLDER = path less ".h5". With sync=, the ranks agree
at the end of each step, through the process group's store and without a collective, whether
any rank saw a non-finite value; if so every rank writes the step's selected calls.
"""
import atexit
import contextlib
import functools
import inspect
import time

import numpy as np
import torch

from . import compiled, distributed, dropout, hooks, stats
from .arguments import SDPA_SIGNATURE, bind_recorded
from .capture import PendingCall, warn
from .finish import case_contents
from .hooks_eager import EAGER_HOOK
from .hooks_flash_attn import FLASH_ATTN_HOOKS
from .hooks_flex import FLEX_HOOK
from .hooks_xformers import XFORMERS_HOOK
from .selection import CallInfo, Selection, nonfinite
from .spec import Unrecordable, read_custom, read_sdpa
from .writer import DumpWriter, RecordingError, group_path

# Health statistics wait at most this long for the file when no case is written.
HEALTH_FLUSH_SECONDS = 5.0

SDPA_HOOK = hooks.Hook("scaled_dot_product_attention",
                       (("torch.nn.functional", "scaled_dot_product_attention"),), read_sdpa,
                       compiled.taps, SDPA_SIGNATURE)
HOOKS = (SDPA_HOOK, FLEX_HOOK, XFORMERS_HOOK, *FLASH_ATTN_HOOKS, EAGER_HOOK)


def _in_backward() -> bool:
    """Whether autograd's engine is running a backward pass on this thread."""
    return torch._C._current_graph_task_id() != -1


def attention(fn):
    """Decorator for a user attention function with an SDPA-like signature (q, k, v, attn_mask,
    is_causal, scale, ... under the names in arguments.ALIASES). Inert unless a Recorder is
    active."""
    hook = hooks.Hook(getattr(fn, "__qualname__", fn.__name__), (), read_custom, compiled.taps,
                      inspect.signature(fn))
    return hooks.make_wrapper(hook, fn)


class Recorder:
    """Records selected attention calls into an attnscope dump (HDF5, schema 1.2).

    path: dump file (created at the first write, truncated if it exists); when a
      torch.distributed process group is initialised at the first write, the run folder of one
      file per rank, FOLDER/rank_{R:05d}.h5 (FOLDER = path less a trailing ".h5"; distributed.py).
      `self.path` is the file written.
    steps, layers: None (all), an int, ints, or callable(int) -> bool; layer = index of the
      attention call within its micro-batch (within the step when there is one). names:
      fnmatch globs on the calling module's name (needs model=). when: None, "nonfinite"
      (output or a gradient has NaN/Inf) or callable(call).
    budget_mb: bound on the file size; the case that would cross it stops the recording.
    model: an nn.Module whose submodule names label the calls ("encoder.layer.3.attention").
    context_parallel: None or this rank's context-parallel shard, {"rank": r, "size": n,
      "ranges": [[start, end], ...]} (token ranges of the full sequence it holds), written as
      root attributes cp_rank, cp_size, cp_ranges; ValueError when malformed.
    sync: None/False (off), True (30 s) or a timeout in seconds: under torch.distributed, at
      the end of each step the ranks agree whether any of them saw a non-finite value in its
      selected calls; if one did, every rank writes that step's selected calls, whatever its
      when= says. A rank not heard from within the timeout: a warning, and this rank decides
      by its own when=. Every rank must construct its Recorders with sync= in the same order.
    """

    def __init__(self, path, steps=None, layers=None, names=None, when=None, budget_mb=1024.0,
                 model=None, context_parallel=None, sync=None, stats=None):
        self.selection = Selection(steps, layers, names, when)
        self._stats = (when == "nonfinite") if stats is None else bool(stats)
        self._health = []  # (call attributes, float32 [H, columns]) not written yet
        self._health_written = time.monotonic()
        self._context_parallel = distributed.check_context_parallel(context_parallel)
        seconds = distributed.sync_seconds(sync)
        self._sync = None if seconds is None else distributed.StepSync(seconds)
        self._writer = DumpWriter(path, budget_mb * 2**20, on_queued=warn)
        self._opened = False  # the file was placed (rank file or path) at the first write
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
        self._warned = set()  # keys given to _warn_once: (kind, ...)
        self._generation = 0  # changes with every step; hooks of older steps are ignored
        self._synced = None  # generation of the last step the ranks agreed on (sync=)
        self._reset_counters(begun=False)
        atexit.register(self._close_writer)  # cases still queued are written at exit

    def _reset_counters(self, begun):
        self._begun = begun  # started by step() / next_step(), so a step without calls warns
        self._calls = 0  # forward calls of the step so far
        self._micro = 0  # current micro-batch
        self._layer = 0  # forward calls of the current micro-batch so far
        self._backward_seen = False  # backward delivered gradients in the current micro-batch
        self._events = 0  # forward calls and dO arrivals of the step so far (forward_seq, ...)

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
        """Ends the step, deactivates, and writes the cases still waiting for the file."""
        self._end_step()
        while self._depth:
            self._deactivate()
        self._close_writer()

    def _close_writer(self):
        self._flush_health(force=True)
        try:
            pending = self._writer.close()
        except RecordingError as error:
            self._stop(str(error))
            return
        if pending is not None:
            warn(f"{self.path} stayed closed to writing (held open read-only by this process); "
                 f"the cases that waited for it are in {pending}")

    def _begin_step(self, number):
        self._step = self._next_auto_step if number is None else int(number)
        self._next_auto_step = self._step + 1
        self._generation += 1
        self._reset_counters(begun=True)
        self._update_live()

    def _activate(self):
        if hooks.active is not None and hooks.active is not self:
            warn(f"another Recorder ({hooks.active.path}) is active; {self.path} records "
                 "nothing inside it")
            return
        if self._depth == 0:
            hooks.install(self, HOOKS)
        self._depth += 1
        self._update_live()

    def _deactivate(self):
        if hooks.active is not self or self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            hooks.uninstall()
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

    def _warn_once(self, key, message):
        if key not in self._warned:
            self._warned.add(key)
            warn(message)

    def _next_event(self) -> int:
        """The step's event counter (a forward call, a dO arriving), then counts one more."""
        self._events += 1
        return self._events - 1

    def _gradient_callback(self):
        """Marks that backward reached this step's calls (ignored once the step is over); returns
        the event number of the gradient's arrival (None once the step is over)."""
        generation = self._generation

        def seen(*_):
            if generation != self._generation:
                return None
            self._backward_seen = True
            return self._next_event()

        return seen

    def _tensor_hook(self):
        """A hook on an unselected call's output: marks backward reaching it, the gradient
        passing unchanged."""
        seen = self._gradient_callback()

        def hook(_grad):
            seen()

        return hook

    # --- one call ---------------------------------------------------------------------------
    def _record_call(self, fn, args, kwargs, caller):
        """A call of hooked function `fn` (hooks.Function) made from frame `caller`."""
        if self._inside:  # SDPA inside a registered attention function is part of that call
            return fn.original(*args, **kwargs)
        self._inside = True
        try:
            if _in_backward():
                return self._recomputed_call(fn, args, kwargs, caller)
            return self._forward_call(fn, args, kwargs, caller)
        finally:
            self._inside = False

    def _forward_call(self, fn, args, kwargs, caller):
        name = fn.hook.name
        try:
            pending, args, kwargs = self._prepare(fn, args, kwargs, caller)
        except Unrecordable as reason:
            self._warn_once(("unrecordable", name, reason.key),
                            f"a call of {name} is not recorded: {reason}")
            pending = None
        except Exception as error:  # the recorder's own failure must not break the step
            self._stop(f"cannot record a call of {name}: {error!r}")
            pending = None
        out = fn.original(*args, **kwargs)
        try:
            if pending is None:
                o = out if isinstance(out, torch.Tensor) else out[0]
                if o.requires_grad:
                    o.register_hook(self._tensor_hook())
            else:
                pending.watch_output(out)
                self._pending.append(pending)
        except Exception as error:
            self._stop(f"cannot record the output of {name}: {error!r}")
        return out

    def _new_call(self, function_name, caller):
        """CallInfo of a forward call when it is selected, else None; counts the call (a call
        after backward delivered gradients starts the next micro-batch)."""
        if self._backward_seen:  # gradient accumulation: the next micro-batch begins
            self._micro += 1
            self._layer = 0
            self._backward_seen = False
        info = CallInfo(self._step, self._layer, self._call_name(function_name, caller),
                        function_name, self._micro, self._calls, self._next_event())
        self._calls += 1
        self._layer += 1
        return info if self.selection.selects_call(info) else None

    def _prepare(self, fn, args, kwargs, caller):
        """(PendingCall or None when not selected, args, kwargs to call the original with)."""
        info = self._new_call(fn.hook.name, caller)
        if info is None:
            return None, args, kwargs
        bound, found, value = bind_recorded(fn.signature, fn.hook.name, args, kwargs)
        spec = fn.hook.read(value, bound.arguments)
        if spec.warning is not None:
            self._warn_once(*spec.warning)
        pending = PendingCall(info, spec, self._gradient_callback())
        for key, t in zip(("q", "k", "v"), pending.hooked_inputs(value["q"], value["k"],
                                                                    value["v"])):
            bound.arguments[found[key]] = t
        if pending.sdpa_args[0] > 0 and pending.backend == "sdpa_math":
            pending.rng_state = dropout.rng_state(value["q"].device)  # nothing draws before
        return pending, bound.args, bound.kwargs

    def _compiled_call(self, function_name, read):
        """A call made by compiled code (compiled.py): its PendingCall, made of the CallSpec
        read() gives (copies of the tensors), when the call is selected; else None. Calls made
        during backward (checkpoint recomputations) are not recorded."""
        if not self._live or self._inside or _in_backward():
            return None
        try:
            info = self._new_call(function_name, None)
            if info is None:
                return None
            call = PendingCall(info, read(), self._gradient_callback(), compiled=True)
        except Unrecordable as reason:
            self._warn_once(("unrecordable", function_name, reason.key),
                            f"a call of {function_name} is not recorded: {reason}")
            return None
        except Exception as error:
            self._stop(f"cannot record a compiled call of {function_name}: {error!r}")
            return None
        self._pending.append(call)
        return call

    def _recomputed_call(self, fn, args, kwargs, caller):
        """A call made during backward: gradient checkpointing recomputing a forward call.
        With use_reentrant=True the gradients flow through this recomputation (the original
        ran under no_grad), with use_reentrant=False through the original graph; either way
        they reach the original call. Unmatched recomputations (calls not selected) pass."""
        self._backward_seen = True
        name = fn.hook.name
        call = None
        try:
            if self._pending:
                bound, found, value = bind_recorded(fn.signature, name, args, kwargs)
                call = self._original_of(name, self._call_name(name, caller), value["q"],
                                         value["k"], value["v"])
        except (RecordingError, TypeError):  # arguments no selected call could have had
            call = None
        except Exception as error:
            self._stop(f"cannot match a recomputed call of {name}: {error!r}")
            call = None
        if call is None:
            return fn.original(*args, **kwargs)
        for key, t in zip(("q", "k", "v"), call.hooked_inputs(value["q"], value["k"],
                                                                 value["v"])):
            bound.arguments[found[key]] = t
        out = fn.original(*bound.args, **bound.kwargs)
        try:
            call.watch_recomputed_output(out)
        except Exception as error:
            self._stop(f"cannot record the recomputed output of {name}: {error!r}")
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
        every = self._any_rank_nonfinite(pending)
        several = self._micro > 0
        # Compiled calls that warned they are not recorded explain a step without calls.
        uncaptured = any(kind == "uncaptured" for kind, *_ in self._warned)
        if self._begun and self._live and self._calls == 0 and not uncaptured:
            self._warn_once(("no_call",), f"step {self._step} made no attention call the "
                            "recorder sees: the model probably computes attention with its own "
                            "matmul + softmax; hint: load it with attn_implementation=\"sdpa\" "
                            "or decorate its attention function with "
                            "@attnscope_record.attention")
        self._begun = False
        if any(call.missed_backward() for call in pending):
            self._warn_once(("backward",), f"step {pending[0].info.step} ended before backward "
                            "reached its attention calls: their do, dq, dk, dv are not "
                            "recorded; hint: run loss.backward() inside `with rec.step(...)`")
        cases = len(self.written)
        if self._stats and self.stopped is None:
            self._collect_health(pending)
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
                if not every and not self.selection.keeps(call):
                    continue
                self._open_file()
                arrays, attrs = case_contents(call, where, self._writer)
                self.written.append(self._writer.write(where, arrays, attrs))
            except RecordingError as error:
                self._stop(str(error))
            except Exception as error:
                self._stop(f"cannot write step {info.step} call {info.call_index} to "
                           f"{self.path}: {error!r}")
        self._flush_health(force=len(self.written) > cases)

    def _collect_health(self, pending):
        """Health statistics of the step's calls (those changed in place are left out)."""
        try:
            for call in pending:
                if not call.modified_in_place():
                    self._health.append(stats.call_stats(call))
        except Exception as error:  # statistics never stop the recording of cases
            self._stats = False
            self._health.clear()
            warn(f"cannot compute health statistics of step {self._step}: {error!r} -- "
                 "statistics stopped, recording goes on")

    def _flush_health(self, force):
        """Writes the waiting statistics as one /health block when `force` or when they waited
        HEALTH_FLUSH_SECONDS; they keep waiting while the file is busy."""
        if not self._health or self.stopped is not None:
            return
        if not force and time.monotonic() - self._health_written < HEALTH_FLUSH_SECONDS:
            return
        try:
            self._open_file()
            table = np.concatenate([rows for _, rows in self._health])
            self._writer.write_health(table, [attrs for attrs, _ in self._health],
                                      stats.COLUMNS)
        except OSError:
            return
        except RecordingError as error:
            self._stop(str(error))
            return
        except Exception as error:
            self._stop(f"cannot write health statistics to {self.path}: {error!r}")
            return
        self._health.clear()
        self._health_written = time.monotonic()

    def _any_rank_nonfinite(self, pending) -> bool:
        """sync=: whether some rank saw a non-finite value in its selected calls of the step
        ending now (then every selected call is written). Agreed once per step, for steps that
        steps= selects and that began or made calls; False without sync=, without a process
        group (warned once) or when the ranks are not all heard from (warned)."""
        ended = self._begun or self._calls > 0
        if (self._sync is None or not ended or self._synced == self._generation
                or not self.selection.selects_step(self._step)):
            return False
        self._synced = self._generation
        identity = distributed.current_rank()
        if identity is None:
            self._warn_once(("sync",), "sync= needs an initialised torch.distributed process "
                            "group and there is none: ignored")
            return False
        try:
            flag = any(nonfinite(c) for c in pending if not c.modified_in_place())
        except Exception as error:  # still publish, so that the other ranks do not wait
            self._stop(f"cannot check step {self._step} for non-finite values: {error!r}")
            flag = False
        return self._sync.any_rank(self._step, identity, flag, warn)

    def _open_file(self):
        """At the first write: places the dump, under torch.distributed in this rank's file of
        the run folder with the rank's root attributes (distributed.py)."""
        if self._opened:
            return
        self._opened = True
        identity = distributed.current_rank()
        if identity is not None:
            try:
                self.path = distributed.rank_file(self._writer.path, identity.rank)
            except OSError as error:
                raise RecordingError(f"cannot create the run folder of {self._writer.path}: "
                                     f"{error}; hint: check that it is writable") from error
            self._writer.path = self.path
        self._writer.root_attrs = distributed.root_attributes(identity, self._context_parallel)
