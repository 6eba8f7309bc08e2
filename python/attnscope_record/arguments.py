"""How the recorder reads an attention call's arguments: SDPA's signature (the builtin has none
to inspect), binding a call to a signature, and the parameter names each SDPA-like argument may
have (a registered attention function's own names; the libraries' q, k, v names too).
"""
import inspect

import torch

from .writer import RecordingError

# SDPA's signature; registered functions and library functions use their own (inspect.signature).
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
    "is_causal": ("is_causal", "causal"), "scale": ("scale", "softmax_scale", "scaling"),
    "enable_gqa": ("enable_gqa",),
}


def bind(signature, args, kwargs):
    """(bound arguments with defaults, parameter name per ALIASES key or None, value per key)."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    found = {key: next((n for n in names if n in bound.arguments), None)
             for key, names in ALIASES.items()}
    value = {key: (bound.arguments[n] if n else None) for key, n in found.items()}
    return bound, found, value


def has_qkv(value) -> bool:
    """Whether bind's `value` holds tensors q, k, v."""
    return all(isinstance(value[key], torch.Tensor) for key in ("q", "k", "v"))


def bind_recorded(signature, function_name, args, kwargs):
    """bind() of a call the recorder reads; RecordingError unless q, k, v are tensors."""
    bound, found, value = bind(signature, args, kwargs)
    if not has_qkv(value):
        raise RecordingError(f"{function_name} got q, k, v that are not tensors")
    return bound, found, value
