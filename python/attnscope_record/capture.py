"""One recorded attention call: references to its tensors and the autograd hooks that catch
the upstream gradient dO and the gradients dQ, dK, dV of exactly this call.

Tensors stay where they live (CPU or GPU) and are only referenced until the step ends; the
writer copies the ones it keeps. In-place changes after the call are detected through the
tensors' version counters, so a modified tensor is never written as if it were the original.
Calls made by compiled code hold copies instead (compiled.py), which nothing else writes to.
"""
import warnings

import torch

from .selection import CallInfo
from .spec import CallSpec

# Schema-1 names of the gradients caught by the hooks, per SDPA input.
GRAD_NAMES = {"q": "dq", "k": "dk", "v": "dv"}
# Datasets with one row per token: [1, T, ...] in a packed call, stored as [T, ...].
TOKEN_TENSORS = ("q", "k", "v", "o", "do", "dq", "dk", "dv")


class PendingCall:
    """Tensors of one call, keyed by schema-1 dataset name (q, k, v, mask|bias, cu_seqlens_q|k,
    o, lse, do, dq, dk, dv), plus the group attributes, from its CallSpec (spec.py). Gradients
    have the shapes of q, k, v and o as passed (SDPA: q [..., H, Sq, D], FlashAttention:
    [B, Sq, H, D], varlen [Tq, H, D]).

    backend: the spec's. sdpa_args: (dropout_p, is_causal, scale as passed, enable_gqa).
    on_gradient: called whenever a gradient of this call arrives; returns the step's event number
    of the arrival (None once the step is over). rng_state: the device's RNG
    state just before the call, kept for dropout replay. compiled: made by compiled code
    (compiled.py), whose tensors are copies."""

    def __init__(self, info: CallInfo, spec: CallSpec, on_gradient, compiled=False):
        self.info = info
        self.tensors = {}
        self._versions = {}
        for name, t in spec.tensors.items():
            self.keep(name, t)
        self.attn_mask = spec.attn_mask
        self.sdpa_args = spec.sdpa_args
        self.backend = spec.attrs["backend"]
        self._outputs = spec.outputs
        self._squeeze_batch = spec.squeeze_batch
        self._bshd_outputs = spec.bshd_outputs
        self.compiled = compiled
        self.rng_state = None
        self._on_gradient = on_gradient
        self.recomputed = 0
        self.attrs = {
            "step": info.step,
            "layer": info.layer,
            "micro_batch": info.micro_batch,
            "call_index": info.call_index,
            "forward_seq": info.forward_seq,
            "name": info.name,
            "function": info.function,
            "device": str(spec.tensors["q"].device),
            **spec.attrs,
        }
        if "mask" in self.tensors:
            self.attrs["mask_convention"] = "attend"
        elif "bias" in self.tensors:
            self.attrs["mask_convention"] = "additive"
        if compiled:
            self.attrs["compiled"] = True
        self.expects_backward = False

    def keep(self, name, tensor):
        self.tensors[name] = tensor.detach()
        self._versions[name] = version_of(tensor)

    def stored(self, name):
        """The tensor as written: packed calls passed as [1, T, ...] lose the batch dim; o and
        dO returned [B, Sq, H, D] beside BHSD inputs (eager attention) become [B, H, Sq, D]."""
        t = self.tensors[name]
        if self._bshd_outputs and name in ("o", "do"):
            t = t.transpose(1, 2)
        return t[0] if self._squeeze_batch and name in TOKEN_TENSORS else t

    def hooked_inputs(self, q, k, v):
        """Aliases of q, k, v whose hooks see only this call's gradients (a hook on q itself
        would also see gradients from q's other uses). Also used on a recomputation of this
        call (gradient checkpointing), whose gradients are this call's."""
        out = []
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.requires_grad:
                t = t.view_as(t)
                t.register_hook(self._grad_hook(GRAD_NAMES[name]))
            out.append(t)
        return out

    def watch_output(self, out):
        """Keeps the outputs of return value `out` and catches dO."""
        outputs = self._outputs(out)
        for name, t in outputs.items():
            self.keep(name, t)
        self._catch_do(outputs["o"])

    def watch_recomputed_output(self, out):
        """Catch dO from `out`, the return value of a recomputation of this call."""
        self._catch_do(self._outputs(out)["o"])

    def _catch_do(self, o):
        if o.requires_grad:
            self.expects_backward = True
            o.register_hook(self._grad_hook("do"))

    def recomputes(self, function, name, q, k, v) -> bool:
        """Whether a call made during backward (q, k, v as passed) recomputes this one: same
        function, module name, shapes, dtypes and devices, and the same q and k values."""
        if (function, name) != (self.info.function, self.info.name):
            return False
        for key, t in (("q", q), ("k", k), ("v", v)):
            mine = self.tensors[key]
            if (t.shape, t.dtype, t.device) != (mine.shape, mine.dtype, mine.device):
                return False
        return torch.equal(q, self.tensors["q"]) and torch.equal(k, self.tensors["k"])

    def missed_backward(self) -> bool:
        """The output needed a gradient but backward has not reached this call yet."""
        return self.expects_backward and "do" not in self.tensors

    def receive(self, name, grad):
        """Gradient `name` (do, dq, dk, dv) of this call. Backward may run twice through a
        retained graph: the latest is kept, and the arrival of its dO is its backward_seq."""
        self.keep(name, grad)
        event = self._on_gradient()
        if name == "do" and event is not None:
            self.attrs["backward_seq"] = event

    def _grad_hook(self, name):
        return lambda grad: self.receive(name, grad)

    def modified_in_place(self):
        """Names of tensors changed in place since they were captured (inference tensors keep
        no version counter: never reported)."""
        return [n for n, t in self.tensors.items()
                if self._versions[n] is not None and version_of(t) != self._versions[n]]


def version_of(tensor):
    """The tensor's version counter (bumped by in-place ops); None for a tensor made under
    torch.inference_mode(), which keeps none."""
    return None if tensor.is_inference() else tensor._version


def warn(message: str):
    warnings.warn("attnscope_record: " + message, RuntimeWarning, stacklevel=3)
