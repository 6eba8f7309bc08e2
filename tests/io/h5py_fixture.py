#!/usr/bin/env python3
"""Writes the h5py-made dumps the io tests read, or checks a file attnscope wrote.

    h5py_fixture.py OUTDIR          writes OUTDIR/h5py_*.h5
    h5py_fixture.py --check FILE    asserts h5py sees FILE's types as numpy would write them

Tensor values follow pattern(i, seed) = ((i * 37 + seed * 11) % 101 - 50) / 16 over the
flattened tensor, exact in float16 / bfloat16 / float32 / float64; the C++ tests recompute it.
"""
import os
import sys

import h5py
import numpy as np


def pattern(shape, seed, dtype):
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    return (((i * 37 + seed * 11) % 101 - 50) / 16.0).astype(dtype).reshape(shape)


def bf16_bits(shape, seed):
    """bfloat16 bit patterns (exact: the pattern needs at most 7 mantissa bits)."""
    f32 = pattern(shape, seed, np.float32)
    return (f32.view(np.uint32) >> 16).astype(np.uint16)


def mask(shape, dtype):
    i = np.arange(int(np.prod(shape)))
    return (i % 3 != 0).astype(dtype).reshape(shape)


def write_native_f16(path):
    with h5py.File(path, "w") as f:
        g = f.create_group("case")
        g["q"] = pattern((2, 4, 5, 8), 1, np.float16)
        g["k"] = pattern((2, 2, 7, 8), 2, np.float16)
        g["v"] = pattern((2, 2, 7, 6), 3, np.float16)
        g.create_dataset("do", data=pattern((2, 4, 5, 6), 4, np.float16), compression="gzip",
                         shuffle=True, chunks=(1, 2, 5, 6))
        g["mask"] = mask((5, 7), np.bool_)
        g.attrs["scale"] = 0.25
        g.attrs["causal"] = np.bool_(True)
        g.attrs["causal_align"] = "bottom_right"
        g.attrs["dtype"] = "float16"
        g.attrs["name"] = "native half"
        g.attrs["description"] = "naïve — ünicode"


def write_bf16(path):
    with h5py.File(path, "w") as f:
        g = f.create_group("case")
        for name, shape, seed in (("q", (1, 2, 3, 4), 1), ("k", (1, 2, 3, 4), 2),
                                  ("v", (1, 2, 3, 4), 3)):
            g[name] = bf16_bits(shape, seed)
            g[name].attrs["dtype"] = "bfloat16"
        g["mask"] = (np.arange(9) % 3 != 0).astype(np.uint8).reshape(1, 1, 3, 3)
        g["bias"] = np.array([[-np.inf, 0, -1e9], [np.inf, 0.5, 0], [0, 0, -np.inf]],
                             dtype=np.float32)
        g.attrs["causal"] = np.bool_(False)
        g.attrs["step"] = 7
        g.attrs["layer"] = np.int64(3)


def write_bshd(path):
    with h5py.File(path, "w") as f:
        g = f.create_group("case")
        g["q"] = pattern((2, 5, 4, 8), 1, np.float32)
        g["k"] = pattern((2, 7, 2, 8), 2, np.float32)
        g["v"] = pattern((2, 7, 2, 8), 3, np.float32)
        g["o"] = pattern((2, 5, 4, 8), 5, np.float32)
        g["lse"] = pattern((2, 4, 5), 6, np.float32)
        g.attrs["layout"] = np.bytes_("BSHD")
        g.attrs["causal"] = 1


def write_3d(path):
    with h5py.File(path, "w") as f:
        f["q"] = pattern((4, 5, 8), 1, np.float64)
        f["k"] = pattern((4, 7, 8), 2, np.float64)
        f["v"] = pattern((4, 7, 8), 3, np.float64)
        f["lse"] = pattern((4, 5), 6, np.float64)
        f.attrs["layout"] = "BHSD"
        f.attrs["name"] = np.bytes_("three-d")


def write_2d(path):
    with h5py.File(path, "w") as f:
        g = f.create_group("case")
        g["q"] = pattern((5, 8), 1, np.float32)
        g["k"] = pattern((7, 8), 2, np.float32)
        g["v"] = pattern((7, 8), 3, np.float32)
        g["mask"] = mask((5, 7), np.bool_)


def write_steps(path):
    with h5py.File(path, "w") as f:
        for step in (10, 2, 1):
            for layer in (11, 0, 9, 10, 1):
                g = f.create_group(f"step_{step}/layer_{layer}")
                g["q"] = pattern((1, 1, 2, 2), step, np.float32)
                g["k"] = pattern((1, 1, 2, 2), layer, np.float32)
                g["v"] = pattern((1, 1, 2, 2), 3, np.float32)
                g.attrs["causal"] = np.bool_(layer % 2 == 1)


def write_lzf(path):
    with h5py.File(path, "w") as f:
        g = f.create_group("case")
        g.create_dataset("q", data=pattern((1, 2, 3, 4), 1, np.float32), compression="lzf")
        g["k"] = pattern((1, 2, 3, 4), 2, np.float32)
        g["v"] = pattern((1, 2, 3, 4), 3, np.float32)


def check(path):
    """Asserts h5py reads what DumpWriter wrote as numpy would have written it."""
    with h5py.File(path, "r") as f:
        g = f["case"]
        assert g["q"].dtype == np.float16, g["q"].dtype
        assert g["mask"].dtype == np.bool_, g["mask"].dtype
        assert g["k"].dtype == np.uint16 and g["k"].attrs["dtype"] == "bfloat16"
        assert np.array_equal(g["q"][...], pattern(g["q"].shape, 1, np.float16))
        assert isinstance(g.attrs["causal"], np.bool_) and bool(g.attrs["causal"])
        assert g.attrs["name"] == "from attnscope", g.attrs["name"]
        assert g.attrs["layout"] == "BHSD"
        assert float(g.attrs["scale"]) == 0.125
        assert int(g.attrs["step"]) == 12
    print("ok")


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        check(argv[2])
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    writers = {"native_f16": write_native_f16, "bf16": write_bf16, "bshd": write_bshd,
               "3d": write_3d, "2d": write_2d, "steps": write_steps, "lzf": write_lzf}
    for name, write in writers.items():
        write(os.path.join(out, f"h5py_{name}.h5"))
    print(f"wrote {len(writers)} files to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
