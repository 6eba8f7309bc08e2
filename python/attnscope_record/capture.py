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

# Schema-1 names of the gradients caught by the hooks, per SDPA input.
GRAD_NAMES = {"q": "dq", "k": "dk", "v": "dv"}


class PendingCall:
    """Tensors of one call, keyed by schema-1 dataset name (q, k, v, mask|bias, o, do, dq, dk,
    dv), plus the group attributes. Shapes are SDPA's: q [..., H, Sq, D], k [..., Hk, Sk, D],
    v [..., Hk, Sk, Dv], o [..., H, Sq, Dv]."""

    def __init__(self, info: CallInfo, q, k, v, attn_mask, dropout_p, is_causal, scale,
                 enable_gqa):
        self.info = info
        self.tensors = {}
        self._versions = {}
        for name, t in (("q", q), ("k", k), ("v", v)):
            self._keep(name, t)
        if attn_mask is not None:
            self._keep("mask" if attn_mask.dtype == torch.bool else "bias", attn_mask)
        head_dim = q.shape[-1]
        self.attrs = {
            "dtype": str(q.dtype).replace("torch.", ""),
            "layout": "BHSD",
            "step": info.step,
            "layer": info.layer,
            "name": info.name,
            "function": info.function,
            "scale": float(scale) if scale is not None else 1.0 / math.sqrt(head_dim),
            "causal": bool(is_causal),
            "enable_gqa": bool(enable_gqa),
            "device": str(q.device),
        }
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
        would also see gradients from q's other uses)."""
        out = []
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.requires_grad:
                t = t.view_as(t)
                t.register_hook(self._grad_hook(GRAD_NAMES[name]))
            out.append(t)
        return out

    def watch_output(self, o):
        self._keep("o", o)
        self.expects_backward = o.requires_grad
        if o.requires_grad:
            o.register_hook(self._grad_hook("do"))

    def missed_backward(self) -> bool:
        """The output needed a gradient but backward has not reached this call yet."""
        return self.expects_backward and "do" not in self.tensors

    def _grad_hook(self, name):
        def hook(grad):
            # Backward may run twice through a retained graph: keep the latest gradient.
            self.tensors[name] = grad.detach()
            self._versions[name] = grad._version

        return hook

    def modified_in_place(self):
        """Names of tensors changed in place since they were captured."""
        return [n for n, t in self.tensors.items() if t._version != self._versions[n]]


def warn(message: str):
    warnings.warn("attnscope_record: " + message, RuntimeWarning, stacklevel=3)
