"""Eager attention hook: the `eager_attention_forward` function of every loaded transformers
modeling module, recorded with backend "eager" (replayed as the unfused kernel, every op
rounded to the recorded dtype, softmax in fp32 from the rounded scores as transformers runs it).

Such a function computes softmax(q k^T * scaling [-> softcap * tanh(. / softcap)] + mask) v,
with k and v repeated to q's heads (GQA), q, k, v [B, H|Hk, S, D], and returns
(o [B, Sq, H, D], attention weights after dropout). The recording keeps q, k, v as passed, the
additive float mask as `bias` (cut to the keys; T5's position_bias added to it in one add where
the model makes two), o and dO transposed to [B, H, Sq, D], and under dropout the keep-mask
read off the returned weights (weights != 0: exact wherever P != 0, and where P == 0 the mask
changes nothing). Dropout counts only when the calling module trains, as in the function.
A call with arguments that change the scores in another way (attention sinks, a head mask, a
bool mask added as numbers) is not recorded, with a warning.
"""
import sys

import torch

from . import compiled, hooks
from .spec import CallSpec, Unrecordable, default_scale
from .semantics import call_attributes

FUNCTION = "eager_attention_forward"
BACKEND = "eager"
# Parameters the reading below understands; any other one that is not None refuses the call.
_READ = {"module", "query", "key", "value", "attention_mask", "scaling", "dropout", "softcap",
         "position_bias", "kwargs"}
# Keyword arguments that change the scores when given (the rest of **kwargs is bookkeeping).
_REFUSED_KWARGS = ("sinks", "s_aux", "head_mask")


def homes() -> tuple:
    """(module, attribute) of every loaded transformers modeling module defining the function."""
    return tuple((name, FUNCTION) for name, module in list(sys.modules.items())
                 if name.startswith("transformers.models.")
                 and FUNCTION in getattr(module, "__dict__", {}))


def _argument(arguments, name):
    """A named parameter, or the same name passed through **kwargs; None when absent."""
    if arguments.get(name) is not None:
        return arguments[name]
    return (arguments.get("kwargs") or {}).get(name)


def read_eager(value, arguments) -> CallSpec:
    q, k, v = value["q"], value["k"], value["v"]
    if q.dim() != 4:
        raise Unrecordable("eager_dims", f"q has {q.dim()} dimensions, not 4")
    extra = [n for n, a in arguments.items() if n not in _READ and a is not None]
    extra += [n for n in _REFUSED_KWARGS if (arguments.get("kwargs") or {}).get(n) is not None]
    if extra:
        raise Unrecordable("eager_args", f"{', '.join(sorted(extra))} changes the scores in a "
                           "way the replay does not compute")
    bias = value["attn_mask"]
    if bias is not None and not bias.is_floating_point():
        raise Unrecordable("eager_mask", f"its attention_mask is {bias.dtype}, added to the "
                           "scores as numbers")
    if bias is not None:
        bias = bias[..., :k.shape[-2]]
    position_bias = _argument(arguments, "position_bias")
    if position_bias is not None:
        bias = position_bias if bias is None else position_bias + bias
    module = arguments.get("module")
    training = bool(getattr(module, "training", False))
    dropout_p = float(value["dropout_p"] or 0.0) if training else 0.0
    tensors = {"q": q, "k": k, "v": v}
    if bias is not None:
        tensors["bias"] = bias
    attrs = {"layout": "BHSD", "scale": default_scale(q, value["scale"]), "causal": False,
             "enable_gqa": k.shape[1] != q.shape[1], **call_attributes(q, BACKEND)}
    softcap = _argument(arguments, "softcap")
    if softcap:
        attrs["softcap"] = float(softcap)
    if dropout_p:
        attrs["dropout_p"] = dropout_p

    def outputs(out):
        kept = {"o": out[0]}
        if dropout_p:
            kept["dropout_mask"] = out[1].detach() != 0
        return kept

    return CallSpec(tensors, attrs, (dropout_p, False, value["scale"], attrs["enable_gqa"]),
                    outputs=outputs, bshd_outputs=True)


EAGER_HOOK = hooks.Hook(FUNCTION, homes, read_eager, compiled.uncaptured)
