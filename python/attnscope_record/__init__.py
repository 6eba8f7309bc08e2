"""attnscope_record: record PyTorch attention calls into attnscope dumps (HDF5, schema 1.2).

    rec = attnscope_record.Recorder("attn.h5", steps=[120], when="nonfinite", model=model)
    with rec.step(step):
        loss = model(batch).loss
        loss.backward()

then `attnscope attn.h5` (GUI) or `attnscope-cli scan attn.h5`. Recorded: SDPA, FlexAttention,
xformers' memory_efficient_attention, FlashAttention's flash_attn_func / flash_attn_varlen_func,
@attention functions; `flex_attention` is torch's, recorded wherever it is referenced from.
"""
from .hooks_flex import flex_attention
from .recorder import Recorder, attention
from .selection import CallInfo, Selection, nonfinite
from .version import __version__
from .writer import RecordingError

__all__ = ["Recorder", "attention", "flex_attention", "CallInfo", "Selection", "nonfinite",
           "RecordingError", "__version__"]
