"""How the recorder reads an attention call's arguments: SDPA's signature (the builtin has none
to inspect) and the parameter names a registered attention function may use for each.
"""
import inspect

import torch

from .writer import RecordingError

# SDPA's signature; registered functions use their own (inspect.signature).
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


def bind(signature, function_name, args, kwargs):
    """(bound arguments, parameter name per ALIASES key or None, value per key)."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    found = {key: next((n for n in names if n in bound.arguments), None)
             for key, names in ALIASES.items()}
    value = {key: (bound.arguments[n] if n else None) for key, n in found.items()}
    q, k, v = value["q"], value["k"], value["v"]
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)) or not 2 <= q.dim() <= 4:
        raise RecordingError(f"{function_name} got q, k, v that are not 2-D to 4-D tensors")
    return bound, found, value
