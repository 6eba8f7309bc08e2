"""Dumps where one case's data is unreadable and the others are fine (issue 7).

    broken_case_dumps.py OUT_DIR

attnscope must open these files, list the broken case with its error and skip it. Each file
holds /step_0 .. /step_3 (q, k, v [1, 2, 16, 8] float32, contiguous, attribute step) except
that /step_2/q is chunked and deflated, so the file holds exactly one raw-data-chunk B-tree
node, which is then corrupted as in bad_chunk_corpus.py:

  one_crashing_case.h5     the chunk B-tree made a node whose children are itself: libhdf5
                           1.10 recurses without end in H5Dread (stack overflow, SIGSEGV)
  one_unreadable_case.h5   /step_2/q's second deflate stream overwritten: H5Dread fails
  two_crashing_cases.h5    /step_1 and /step_2 both carry the self-looping node (two nodes)
  many_cases.h5            1500 healthy cases /many/case_NNNNN (q, k, v [1, 1, 2, 2]): a probe
                           listing and progress far larger than a pipe buffer
"""
import os
import struct
import sys

import h5py
import numpy as np

SHAPE = (1, 2, 16, 8)
CHUNK = (1, 1, 16, 8)
KEY = 4 + 4 + 8 * (len(SHAPE) + 1)  # v1 B-tree key of a chunk index: size, mask, offsets


def _values(seed):
    i = np.arange(int(np.prod(SHAPE)), dtype=np.int64)
    return (((i * 37 + seed * 11) % 101 - 50) / 16.0).astype(np.float32).reshape(SHAPE)


def _write(path, chunked):
    """Cases /step_0../step_3; q of the cases in `chunked` is chunked + deflated."""
    with h5py.File(path, "w", libver="earliest", track_order=False) as f:
        for n in range(4):
            g = f.create_group(f"step_{n}", track_order=False)
            g.attrs["step"] = n
            for seed, name in ((0, "q"), (1, "k"), (2, "v")):
                extra = dict(chunks=CHUNK, compression="gzip") if n in chunked and name == "q" else {}
                g.create_dataset(name, data=_values(seed + 3 * n), track_times=False, **extra)
        return {n: [(c.byte_offset, c.size) for c in
                    (f[f"step_{n}/q"].id.get_chunk_info(i) for i in range(2))]
                for n in chunked}


def _patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _self_loop(path):
    """Every raw-data-chunk B-tree node of the file made an inner node pointing at itself."""
    data = open(path, "rb").read()
    at = data.find(b"TREE\x01")
    assert at > 0
    while at > 0:
        _patch(path, at + 5, b"\x01")
        for child in (at + 24 + KEY, at + 24 + KEY + 8 + KEY):
            _patch(path, child, struct.pack("<Q", at))
        at = data.find(b"TREE\x01", at + 1)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "one_crashing_case.h5")
    _write(path, {2})
    _self_loop(path)

    path = os.path.join(out, "one_unreadable_case.h5")
    offset, size = _write(path, {2})[2][-1]
    _patch(path, offset, bytes((i * 73 + 41) % 256 for i in range(size)))

    path = os.path.join(out, "two_crashing_cases.h5")
    _write(path, {1, 2})
    _self_loop(path)

    with h5py.File(os.path.join(out, "many_cases.h5"), "w", libver="earliest") as f:
        for n in range(1500):
            g = f.create_group(f"many/case_{n:05d}")
            for name in "qkv":
                g.create_dataset(name, data=np.full((1, 1, 2, 2), n, np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
