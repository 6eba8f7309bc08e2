"""The recorder under torch.distributed: the rank's identity, one file per rank, and the opt-in
agreement (sync=) that makes every rank write a step in which some rank saw a non-finite value.

Naming: when a process group is initialised at the first write, `Recorder(path)` writes rank
R's file FOLDER/rank_{R:05d}.h5, FOLDER = path less a trailing ".h5" (created if missing):
Recorder("runs/nan_hunt.h5") on rank 1 writes runs/nan_hunt/rank_00001.h5.
Without a process group, path is the file. Each rank's file root carries rank, world_size,
local_rank (env LOCAL_RANK, else rank), host, pid and process_group (the backend: "gloo",
"nccl", ...); with context_parallel= also cp_rank, cp_size and cp_ranges (int64 [n, 2]: the token
ranges [start, end) of the full sequence this rank holds, in the order it holds them).

No collective is ever called: only local queries of the default process group and, for sync=,
its key-value store (set, wait, get, check, delete_key), so a rank that fails, hangs or skips a
step costs the others at most the sync timeout, never a deadlock.
"""
import datetime
import itertools
import os
import socket
import time
from dataclasses import dataclass

import numpy as np
import torch.distributed as dist

DEFAULT_SYNC_SECONDS = 30.0
CONTEXT_PARALLEL_KEYS = {"rank", "size", "ranges"}
_SYNC_RUNS = itertools.count()  # namespaces the store keys of each syncing Recorder


@dataclass(frozen=True)
class RankIdentity:
    rank: int
    world_size: int
    local_rank: int
    host: str
    pid: int
    process_group: str


def current_rank():
    """This process's RankIdentity in the default process group; None when none is
    initialised. Local queries only."""
    if not dist.is_available() or not dist.is_initialized():
        return None
    rank = dist.get_rank()
    return RankIdentity(rank, dist.get_world_size(), int(os.environ.get("LOCAL_RANK", rank)),
                        socket.gethostname(), os.getpid(), str(dist.get_backend()))


def rank_file(path, rank: int) -> str:
    """FOLDER/rank_RRRRR.h5 of the module's naming scheme; creates FOLDER (OSError if it
    cannot)."""
    folder = os.fspath(path)
    if folder.endswith(".h5"):
        folder = folder[:-len(".h5")]
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"rank_{rank:05d}.h5")


def root_attributes(identity, context_parallel) -> dict:
    """Root attributes of a rank's file: the identity's (when not None) and the checked
    context_parallel's (when not None)."""
    attrs = {}
    if identity is not None:
        attrs.update(rank=identity.rank, world_size=identity.world_size,
                     local_rank=identity.local_rank, host=identity.host, pid=identity.pid,
                     process_group=identity.process_group)
    if context_parallel is not None:
        attrs.update(context_parallel)
    return attrs


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def check_context_parallel(cp):
    """None, or the root attributes {cp_rank, cp_size, cp_ranges} of a context_parallel dict
    {"rank": r, "size": n, "ranges": [[start, end], ...]}: 0 <= r < n, 0 <= start < end, ranges
    not overlapping. ValueError naming the problem otherwise."""
    if cp is None:
        return None
    if not isinstance(cp, dict) or set(cp) != CONTEXT_PARALLEL_KEYS:
        raise ValueError("attnscope_record: context_parallel must be a dict with exactly the "
                         "keys rank, size, ranges, e.g. {'rank': 1, 'size': 2, 'ranges': "
                         f"[[0, 512], [1536, 2048]]}}, not {cp!r}")
    rank, size = cp["rank"], cp["size"]
    if not (_is_int(rank) and _is_int(size) and 0 <= rank < size):
        raise ValueError("attnscope_record: context_parallel needs integers 0 <= rank < size, "
                         f"got rank={rank!r}, size={size!r}")
    ranges = _check_ranges(cp["ranges"])
    return {"cp_rank": int(rank), "cp_size": int(size), "cp_ranges": ranges}


def _check_ranges(ranges) -> np.ndarray:
    """int64 [n, 2] of non-empty, non-overlapping token ranges [start, end), n >= 1."""
    try:
        pairs = [tuple(r) for r in ranges]
    except TypeError:
        pairs = None
    if (not pairs or any(len(p) != 2 or not all(map(_is_int, p)) or not 0 <= p[0] < p[1]
                         for p in pairs)):
        raise ValueError("attnscope_record: context_parallel ranges must be a non-empty list of "
                         f"[start, end] integer pairs with 0 <= start < end, got {ranges!r}")
    ordered = sorted(pairs)
    for (_, end), (start, _) in zip(ordered, ordered[1:]):
        if start < end:
            raise ValueError(f"attnscope_record: context_parallel ranges overlap: {ranges!r}")
    return np.array(pairs, dtype=np.int64)


def sync_seconds(sync):
    """The sync= timeout in seconds (True: DEFAULT_SYNC_SECONDS), None when off (None, False);
    ValueError unless a positive number."""
    if sync is None or sync is False:
        return None
    if sync is True:
        return DEFAULT_SYNC_SECONDS
    if not isinstance(sync, (int, float)) or not sync > 0:
        raise ValueError(f"attnscope_record: sync must be None, True/False or a timeout in "
                         f"seconds > 0, not {sync!r}")
    return float(sync)


class StepSync:
    """sync=: at the end of a step each rank publishes its flag (its selected calls saw a
    non-finite value) under attnscope/RUN/STEP/RANK in the default group's store and waits, at
    most `seconds`, for the other ranks' flags of that step.

    RUN numbers the syncing Recorders of the process in construction order, so every rank must
    construct them in the same order; keys of different steps never meet, so a step that timed
    out leaves a stale key but cannot confuse a later one. A rank deletes its key of the last
    agreed step once the next step is agreed (every rank has read it by then); the keys of the
    last agreed step and of steps that timed out stay in the store (a few bytes each)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._prefix = f"attnscope/{next(_SYNC_RUNS)}"
        self._agreed_key = None  # this rank's key of the last agreed step

    def any_rank(self, step: int, identity: RankIdentity, flag: bool, warn) -> bool:
        """Whether some rank's flag of `step` is set. On a timeout or store error: warn(message)
        and this rank's own flag. Never raises; blocks at most `seconds` (only store.wait waits
        for other ranks)."""
        if identity.world_size == 1:
            return flag
        keys = [f"{self._prefix}/{step}/{r}" for r in range(identity.world_size)]
        mine = keys[identity.rank]
        others = [k for k in keys if k != mine]
        start = time.monotonic()
        try:
            store = dist.distributed_c10d._get_default_store()
            store.set(mine, b"1" if flag else b"0")
            store.wait(others, datetime.timedelta(seconds=self.seconds))
            flags = [store.get(k) == b"1" for k in others]
        except Exception as error:
            timed_out = time.monotonic() - start >= self.seconds
            warn(self._failure(step, identity.world_size, others, error, timed_out))
            return flag
        self._forget_agreed(store)
        self._agreed_key = mine
        return flag or any(flags)

    def _forget_agreed(self, store):
        if self._agreed_key is None:
            return
        try:
            store.delete_key(self._agreed_key)
        except Exception:  # stores without delete_key keep it: harmless, keys never repeat
            pass

    def _failure(self, step, world_size, others, error, timed_out) -> str:
        local = "this rank records by its own when= filter"
        if not timed_out:
            return f"sync of step {step} failed ({error!r}); {local}"
        try:
            store = dist.distributed_c10d._get_default_store()
            heard = 1 + sum(bool(store.check([k])) for k in others)
        except Exception:
            heard = "?"
        return (f"sync of step {step} timed out after {self.seconds:g} s: heard from {heard} of "
                f"{world_size} ranks; {local}")
