"""Writes finished calls as schema-1.1 cases into one HDF5 file: /step_NNNNNN/layer_MM, or
/step_NNNNNN/micro_KK/layer_MM when the step had several micro-batches. The file root carries
the schema version (attnscope_schema = 1, attnscope_schema_minor = 1, as attnscope's own
writer) and writer.

The file is created (truncated) at the first write and reopened in append mode for each
later flush, so it is a complete, readable dump between steps even if the run dies. A size
budget bounds it: a case that would cross the budget is not written and recording stops.
Element types keep the run's precision exactly: float16/32/64 as themselves, bfloat16 as
uint16 bit patterns with dataset attribute dtype="bfloat16", masks as numpy bool, the packed
sequences' starts (cu_seqlens_q / cu_seqlens_k) as int32 / int64.
"""
import os

import h5py
import numpy as np
import torch

from .version import __version__

SCHEMA_VERSION = (1, 1)  # (attnscope_schema, attnscope_schema_minor)
WRITER = f"attnscope_record {__version__}"
# Upper bound on HDF5 metadata per dataset / group (headers, attributes, B-tree nodes).
DATASET_OVERHEAD = 4096
GROUP_OVERHEAD = 4096
# Integer datasets of a packed (THD) case: the sequences' starts.
INDEX_DATASETS = ("cu_seqlens_q", "cu_seqlens_k")


class RecordingError(Exception):
    """A problem that stops recording; its message names the file and gives a hint."""


def host_array(t: torch.Tensor, name: str = ""):
    """(numpy array, dataset attributes) holding exactly the tensor's values on the host; only
    the INDEX_DATASETS may be int32 / int64."""
    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), {"dtype": "bfloat16"}
    if t.dtype in (torch.float16, torch.float32, torch.float64, torch.bool, torch.uint8):
        return t.numpy(), {}
    if name in INDEX_DATASETS and t.dtype in (torch.int32, torch.int64):
        return t.numpy(), {}
    raise RecordingError(f"unsupported element type {t.dtype}" + (f" of {name}" if name else ""))


def to_4d(name: str, a: np.ndarray, rank: int) -> np.ndarray:
    """Masks broadcast against [B, H, Sq, Sk]: give them the leading 1s schema 1 reads."""
    if name in ("mask", "bias", "dropout_mask") and a.ndim < rank:
        return a.reshape((1,) * (rank - a.ndim) + a.shape)
    return a


def group_path(step: int, layer: int, micro_batch=None) -> str:
    """micro_batch: None when the step had one micro-batch."""
    micro = "" if micro_batch is None else f"/micro_{micro_batch:02d}"
    return f"/step_{step:06d}{micro}/layer_{layer:02d}"


class DumpWriter:
    def __init__(self, path, budget_bytes: int):
        self.path = os.fspath(path)
        self.budget = int(budget_bytes)
        self.used = 0
        self.cases = 0
        self._created = False

    def case_bytes(self, arrays, *more_datasets: int) -> int:
        """Bytes a case takes: arrays plus datasets of `more_datasets` bytes still to come."""
        sizes = [a.nbytes for a, _ in arrays.values()] + list(more_datasets)
        return GROUP_OVERHEAD + sum(n + DATASET_OVERHEAD for n in sizes)

    def check_fits(self, where: str, size: int):
        """Raises the budget's RecordingError if a case of `size` bytes does not fit."""
        if self.used + size > self.budget:
            raise RecordingError(
                f"size budget of {self.budget / 2**20:.1f} MiB for {self.path} reached: case "
                f"{where} needs {size / 2**20:.2f} MiB, "
                f"{self.used / 2**20:.2f} MiB already used by {self.cases} cases; hint: raise "
                "budget_mb or select fewer steps/layers")

    def write(self, where: str, arrays, attrs) -> str:
        """arrays: name -> (ndarray, dataset attrs). Returns the group path written."""
        size = self.case_bytes(arrays)
        self.check_fits(where, size)
        try:
            if not self._created:
                parent = os.path.dirname(os.path.abspath(self.path))
                if not os.path.isdir(parent):
                    raise OSError(f"directory {parent} does not exist")
            with h5py.File(self.path, "a" if self._created else "w") as f:
                if not self._created:
                    f.attrs["attnscope_schema"], f.attrs["attnscope_schema_minor"] = SCHEMA_VERSION
                    f.attrs["writer"] = WRITER
                self._created = True
                if where in f:
                    raise RecordingError(f"{self.path}: group {where} already exists (the same "
                                         "step number was recorded twice); hint: pass distinct "
                                         "step numbers to Recorder.step()")
                g = f.create_group(where)
                for key, value in attrs.items():
                    g.attrs[key] = value
                rank = arrays["q"][0].ndim
                for name, (a, dattrs) in arrays.items():
                    d = g.create_dataset(name, data=to_4d(name, a, rank))
                    for key, value in dattrs.items():
                        d.attrs[key] = value
        except RecordingError:
            raise
        except (OSError, ValueError, TypeError) as error:
            raise RecordingError(f"cannot write {where} to {self.path}: {error}; hint: check "
                                 "that the directory exists and is writable and that no other "
                                 "process holds the file open") from error
        self.used += size
        self.cases += 1
        return where
