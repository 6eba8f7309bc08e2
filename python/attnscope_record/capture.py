"""One recorded attention call: references to its tensors and the autograd hooks that catch
the upstream gradient dO and the gradients dQ, dK, dV of exactly this call.

Tensors stay where they live (CPU or GPU) and are only referenced until the step ends; the
writer copies the ones it keeps. In-place changes after the call are detected through the
tensors' version counters, so a modified tensor is never written as if it were the original.
"""
import math
import warnings

import torch

from .selection import CallInfo
from .semantics import call_attributes

# Schema-1 names of the gradients caught by the hooks, per SDPA input.
GRAD_NAMES = {"q": "dq", "k": "dk", "v": "dv"}


class PendingCall:
    """Tensors of one call, keyed by schema-1 dataset name (q, k, v, mask|bias, o, do, dq, dk,
    dv), plus the group attributes. Shapes are SDPA's: q [..., H, Sq, D], k [..., Hk, Sk, D],
    v [..., Hk, Sk, Dv], o [..., H, Sq, Dv].

    backend: semantics.sdpa_backend's name or "custom". sdpa_args: (dropout_p, is_causal,
    scale as passed, enable_gqa). on_gradient: called whenever a hook of this call fires.
    rng_state: the device's RNG state just before the call, kept for dropout replay."""

    def __init__(self, info: CallInfo, q, k, v, attn_mask, dropout_p, is_causal, scale,
                 enable_gqa, backend, on_gradient):
        self.info = info
        self.tensors = {}
        self._versions = {}
        for name, t in (("q", q), ("k", k), ("v", v)):
            self._keep(name, t)
        self.attn_mask = None
        if attn_mask is not None:
            self._keep("mask" if attn_mask.dtype == torch.bool else "bias", attn_mask)
            self.attn_mask = attn_mask.detach()
        self.sdpa_args = (float(dropout_p or 0.0), bool(is_causal), scale, bool(enable_gqa))
        self.backend = backend
        self.rng_state = None
        self._on_gradient = on_gradient
        self.recomputed = 0
        head_dim = q.shape[-1]
        self.attrs = {
            "layout": "BHSD",
            "step": info.step,
            "layer": info.layer,
            "micro_batch": info.micro_batch,
            "call_index": info.call_index,
            "name": info.name,
            "function": info.function,
            "scale": float(scale) if scale is not None else 1.0 / math.sqrt(head_dim),
            "causal": bool(is_causal),
            "enable_gqa": bool(enable_gqa),
            "device": str(q.device),
        }
        self.attrs.update(call_attributes(q, attn_mask, backend))
        if is_causal:
            self.attrs["causal_align"] = "top_left"
        if dropout_p:
            self.attrs["dropout_p"] = float(dropout_p)
        self.expects_backward = False

    def _keep(self, name, tensor):
        self.tensors[name] = tensor.detach()
        self._versions[name] = tensor._version

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

    def watch_output(self, o):
        self._keep("o", o)
        self.watch_recomputed_output(o)

    def watch_recomputed_output(self, o):
        """Catch dO from `o`, the output of this call or of its recomputation."""
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

    def _grad_hook(self, name):
        def hook(grad):
            # Backward may run twice through a retained graph: keep the latest gradient.
            self.tensors[name] = grad.detach()
            self._versions[name] = grad._version
            self._on_gradient()

        return hook

    def modified_in_place(self):
        """Names of tensors changed in place since they were captured."""
        return [n for n, t in self.tensors.items() if t._version != self._versions[n]]


def warn(message: str):
    warnings.warn("attnscope_record: " + message, RuntimeWarning, stacklevel=3)
