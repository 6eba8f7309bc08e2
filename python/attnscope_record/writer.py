"""Writes finished calls as cases into one HDF5 file (schema 1.2): /step_NNNNNN/layer_MM, or
/step_NNNNNN/micro_KK/layer_MM when the step had several micro-batches. The file root carries
the schema version (attnscope_schema = 1, attnscope_schema_minor = 2), writer and the
DumpWriter's root_attrs (under torch.distributed: the rank's identity,
distributed.py).

The file is created (truncated) at the first write and reopened in append mode for each
later flush, so it is a complete, readable dump between steps even if the run dies. A size
budget bounds it: a case that would cross the budget is not written and recording stops.

A dump open elsewhere never stops recording (issue 21): the file is opened without HDF5's file
lock (a viewer's shared lock, attnscope's GUI or h5py in a notebook, cannot refuse the write),
and while a write runs DUMP.writing holds "pid host" so that readers failing on a step
half-written say so instead of calling the file corrupt. When the file still cannot be opened
for writing (this very process holds it open read-only through h5py), the case stays queued in
memory (counted in the budget) and is written at the next write or at close; a queue left at
close goes to DUMP.pending-PID.h5, named in a warning.
Health statistics (stats.py) go to /health/block_NNNNNN: float32 [rows, columns] with
attributes `columns` (names, comma-separated) and `calls` (JSON list of the calls' attributes,
each owning `heads` consecutive rows), contiguous like every dataset here.
Element types keep the run's precision exactly: float16/32/64 as themselves, bfloat16 as
uint16 bit patterns with dataset attribute dtype="bfloat16", masks as numpy bool, the packed
sequences' starts (cu_seqlens_q / cu_seqlens_k) as int32 / int64.
"""
import json
import os
import socket

import h5py
import numpy as np
import torch

from .version import __version__

SCHEMA_VERSION = (1, 2)  # (attnscope_schema, attnscope_schema_minor); 1.2 adds /health
HEALTH_GROUP = "/health"
HEALTH_SCHEMA = 1
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


def _busy(error: OSError) -> bool:
    """The file cannot be opened for writing now, but may be later (a handle of this process
    holds it open read-only, or a lock of a writer that does take them)."""
    text = str(error)
    return "already open" in text or "lock" in text


class DumpWriter:
    def __init__(self, path, budget_bytes: int, on_queued=None):
        """on_queued(message): told once when cases start waiting for the file. path and
        root_attrs (more attributes of the file root) may change until the first write."""
        self.path = os.fspath(path)
        self.root_attrs = {}
        self.budget = int(budget_bytes)
        self.used = 0
        self.cases = 0
        self._created = False
        self._queue = []  # (where, arrays, attrs) not written yet, in order
        self._on_queued = on_queued
        self._told = False

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
        """arrays: name -> (ndarray, dataset attrs). Returns the group path, written or queued
        behind earlier cases the file could not take yet."""
        size = self.case_bytes(arrays)
        self.check_fits(where, size)
        self._queue.append((where, arrays, attrs))
        self.used += size
        self.cases += 1
        self.flush()
        return where

    def flush(self) -> bool:
        """Writes the queued cases in order; False when the file cannot be opened for writing
        now (they stay queued)."""
        while self._queue:
            where, arrays, attrs = self._queue[0]
            try:
                self._write_now(self.path, where, arrays, attrs)
            except RecordingError:
                self._queue.clear()  # recording stops: nothing is retried at close
                raise
            except OSError as error:
                if not self._told and self._on_queued is not None:
                    self._on_queued(f"cannot open {self.path} for writing now ({error}); "
                                    f"{where} and the next cases wait in memory and are "
                                    "written as soon as it opens (at the latest at close)")
                self._told = True
                return False
            self._queue.pop(0)
        return True

    def close(self):
        """Writes what is queued; what the file still refuses goes to DUMP.pending-PID.h5.
        Returns that file's path, or None."""
        if self.flush():
            return None
        pending = f"{self.path}.pending-{os.getpid()}.h5"
        fresh = True
        for where, arrays, attrs in self._queue:
            self._write_now(pending, where, arrays, attrs, create=fresh)
            fresh = False
        self._queue.clear()
        return pending

    def _write_now(self, path, where, arrays, attrs, create=None):
        """Writes one case into `path` (created when `create`, default: at the first write of
        the dump). OSError when the file cannot be opened for writing now (_busy)."""
        def fill(f):
            if where in f:
                raise RecordingError(f"{path}: group {where} already exists (the same "
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

        self._open_and(path, where, fill, create)

    def write_health(self, table, calls, columns):
        """Appends one block of health statistics (stats.py): float32 `table` [rows, columns],
        `calls` the attributes of the calls whose rows it holds, in order, each with `heads`
        rows. The block counts against the budget; OSError when the file is busy (_busy)."""
        calls_json = json.dumps(calls, separators=(",", ":"))
        size = DATASET_OVERHEAD + table.nbytes + len(calls_json)
        self.check_fits(HEALTH_GROUP, size)

        def fill(f):
            group = f.require_group(HEALTH_GROUP)
            group.attrs["health_schema"] = HEALTH_SCHEMA
            name = f"block_{len(group):06d}"
            d = group.create_dataset(name, data=table)
            d.attrs["columns"] = ",".join(columns)
            d.attrs["calls"] = calls_json

        self._open_and(self.path, HEALTH_GROUP, fill, None)
        self.used += size

    def _open_and(self, path, where, fill, create):
        """Opens `path` for writing (created when `create`, default: at the first write of the
        dump), runs fill(h5py.File) and closes it. OSError when the file cannot be opened for
        writing now (_busy); other failures become a RecordingError naming `where`."""
        create = not self._created if create is None else create
        try:
            if create:
                parent = os.path.dirname(os.path.abspath(path))
                if not os.path.isdir(parent):
                    raise OSError(f"directory {parent} does not exist")
            with _writing_marker(path), h5py.File(path, "w" if create else "a",
                                                  locking=False) as f:
                if create:
                    f.attrs["attnscope_schema"], f.attrs["attnscope_schema_minor"] = SCHEMA_VERSION
                    f.attrs["writer"] = WRITER
                    f.attrs.update(self.root_attrs)
                if path == self.path:
                    self._created = True
                fill(f)
        except RecordingError:
            raise
        except OSError as error:
            if _busy(error):
                raise
            raise RecordingError(f"cannot write {where} to {path}: {error}; hint: check "
                                 "that the directory exists and is writable") from error
        except (ValueError, TypeError) as error:
            raise RecordingError(f"cannot write {where} to {path}: {error}") from error


class _writing_marker:
    """DUMP.writing holds "pid host" while a write runs (see the module's docstring)."""

    def __init__(self, path):
        self.marker = path + ".writing"

    def __enter__(self):
        with open(self.marker, "w") as f:
            f.write(f"{os.getpid()} {socket.gethostname()}\n")

    def __exit__(self, *exc):
        try:
            os.remove(self.marker)
        except OSError:
            pass
        return False
