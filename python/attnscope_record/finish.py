"""A finished call as the datasets and attributes of its case: host copies of its tensors and,
for a call with dropout, the keep-mask `dropout_mask` its hook read, else the regenerated one
when it verifies (replay attributes dropout_replay, dropout_note). The mask counts against the
writer's budget.
"""
import math

from . import dropout
from .writer import host_array


def case_contents(call, where, writer):
    """(arrays: name -> (ndarray, dataset attrs), group attrs) of `call` written at `where`;
    raises the writer's RecordingError when the case with its mask would cross the budget."""
    arrays = {n: host_array(call.stored(n), n) for n in call.tensors}
    attrs = dict(call.attrs)
    if call.sdpa_args[0] <= 0:
        return arrays, attrs
    if "dropout_mask" in arrays:  # read off the call's own outputs (hooks_eager.py)
        attrs["dropout_replay"] = "mask"
        return arrays, attrs
    reason = dropout.unavailable_reason(call.backend, call.rng_state, call.tensors, call.compiled)
    keep = None
    if reason is None:
        shape = dropout.keep_mask_shape(call.tensors["q"], call.tensors["k"], call.sdpa_args[3])
        writer.check_fits(where, writer.case_bytes(arrays, math.prod(shape)))
        try:
            keep, reason = dropout.replay(call.tensors, call.attn_mask, call.sdpa_args,
                                          call.rng_state)
        except Exception as error:  # a failed replay leaves the case without a mask
            reason = f"regenerating the dropout mask failed: {error!r}"
    if keep is not None:
        arrays["dropout_mask"] = host_array(keep)
        attrs["dropout_replay"] = "mask"
    else:
        attrs["dropout_replay"] = "unavailable"
        attrs["dropout_note"] = reason
    return arrays, attrs
