"""Hostile dumps whose metadata is intact but whose tensor data cannot be read (issue 7).

Used by make_bad_corpus.py. Discovery (group walk, attributes, types, shapes) succeeds on
these files; only reading the data of /case/q fails, in the chunk index or a compressed chunk,
so attnscope's probe must test-read data, not only metadata. q is the only chunked dataset
(k, v contiguous), so the file holds exactly one raw-data-chunk B-tree node ("TREE", type 1).
"""
import os
import struct

import h5py
import numpy as np

SHAPE = (2, 2, 16, 8)  # two chunks of (1, 2, 16, 8)
CHUNK = (1, 2, 16, 8)


def _values(shape, seed):
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    return (((i * 37 + seed * 11) % 101 - 50) / 16.0).astype(np.float32).reshape(shape)


def _chunked_case(path):
    """/case with a deflated, chunked q and contiguous k, v; returns q's chunk (offset, size)."""
    with h5py.File(path, "w", libver="earliest", track_order=False) as f:
        g = f.create_group("case", track_order=False)
        g.create_dataset("q", data=_values(SHAPE, 0), chunks=CHUNK, compression="gzip",
                         compression_opts=4, track_times=False)
        for seed, name in ((1, "k"), (2, "v")):
            g.create_dataset(name, data=_values(SHAPE, seed), track_times=False)
        q = g["q"].id
        return [(info.byte_offset, info.size)
                for info in (q.get_chunk_info(i) for i in range(q.get_num_chunks()))]


def _patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _chunk_tree(path):
    """Byte offset of the only raw-data-chunk B-tree node of the file."""
    data = open(path, "rb").read()
    at = data.find(b"TREE\x01")
    assert at > 0 and data.find(b"TREE\x01", at + 1) < 0
    return at


def chunk_corpus(out, expect):
    # The last chunk's deflate stream overwritten with a fixed non-deflate pattern.
    path = os.path.join(out, "garbage_deflate_chunk.h5")
    chunks = _chunked_case(path)
    offset, size = chunks[-1]
    _patch(path, offset, bytes((i * 73 + 41) % 256 for i in range(size)))
    expect("garbage_deflate_chunk.h5", "/case/q", "cannot read the data")

    # v1 B-tree node: "TREE", type, level, entries (2), left and right sibling (8 each), then
    # per entry a key (chunk size u32, filter mask u32, rank + 1 offsets u64) and a child
    # address u64. The second child now points far beyond the end of the file.
    key = 4 + 4 + 8 * (len(SHAPE) + 1)
    path = os.path.join(out, "chunk_index_beyond_eof.h5")
    _chunked_case(path)
    tree = _chunk_tree(path)
    second_child = tree + 24 + key + 8 + key
    _patch(path, second_child, struct.pack("<Q", 1 << 40))
    expect("chunk_index_beyond_eof.h5", "/case/q", "cannot read the data")

    # The first key's chunk size made 2 GiB: the library is asked to read and inflate a chunk
    # far larger than the file.
    path = os.path.join(out, "chunk_size_2gib.h5")
    _chunked_case(path)
    tree = _chunk_tree(path)
    _patch(path, tree + 24, struct.pack("<I", 0x7FFFFFF0))
    expect("chunk_size_2gib.h5", "/case/q", "cannot read the data")

    # The node made an inner node (level 1) whose children are itself: libhdf5 1.10 recurses
    # without end in H5Dread and dies (SIGSEGV); only the probe process goes down.
    path = os.path.join(out, "chunk_btree_self_loop.h5")
    _chunked_case(path)
    tree = _chunk_tree(path)
    _patch(path, tree + 5, b"\x01")
    for child in (tree + 24 + key, tree + 24 + key + 8 + key):
        _patch(path, child, struct.pack("<Q", tree))
    expect("chunk_btree_self_loop.h5", "/case/q", "while reading the dataset's data")
