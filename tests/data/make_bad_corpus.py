#!/usr/bin/env python3
"""Writes the hostile-dump corpus tests/data/bad/ (*.h5, and the .pt / .npz / .npy /
.safetensors files of bad_bug_report_corpus.py) and its expectations (expected.json).

    make_bad_corpus.py [OUTDIR]      (default: the bad/ folder next to this script)

Every file is a dump attnscope must refuse: `attnscope-cli info` and `scan` exit 2 with a
message naming the file, the object (`object`, "" when the file as a whole is bad), the
problem (`problem`, a substring of the message) and a hint. Files are small (sizes are
declared, not written) and deterministic: no timestamps, fixed values, sorted creation.
Crash reproducers found by fuzzing are kept as `fuzz_*` (.h5, .pt, ...) and are not rewritten
here; their expectations are kept from the previous expected.json.
"""
import json
import os
import sys

import h5py
import numpy as np

from bad_bug_report_corpus import bug_report_corpus
from bad_chunk_corpus import chunk_corpus

EXPECTED = {}


def expect(name, obj, problem):
    EXPECTED[name] = {"object": obj, "problem": problem}


def values(shape, seed=0, dtype=np.float32):
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    return (((i * 37 + seed * 11) % 101 - 50) / 16.0).astype(dtype).reshape(shape)


def new_file(out, name):
    f = h5py.File(os.path.join(out, name), "w", libver="earliest", track_order=False)
    return f


def dataset(group, name, data=None, **kw):
    return group.create_dataset(name, data=data, track_times=False, **kw)


def case(out, name, q=(1, 2, 4, 8), k=(1, 2, 4, 8), v=(1, 2, 4, 8), attrs=None, extra=None,
         skip=()):
    """One group /case with q, k, v of the given shapes (float32) plus `extra` datasets."""
    with new_file(out, name) as f:
        g = f.create_group("case", track_order=False)
        for seed, (n, shape) in enumerate((("q", q), ("k", k), ("v", v))):
            if n not in skip:
                dataset(g, n, values(shape, seed))
        for n, data in (extra or {}).items():
            dataset(g, n, data)
        for key, value in (attrs or {}).items():
            g.attrs[key] = value
    return os.path.join(out, name)


def raw_files(out):
    with open(os.path.join(out, "not_hdf5_text.h5"), "w") as f:
        f.write("this is a CSV export, not an HDF5 dump\nq,k,v\n1,2,3\n")
    expect("not_hdf5_text.h5", "", "not an HDF5 file")
    with open(os.path.join(out, "empty_file.h5"), "wb") as f:
        pass
    expect("empty_file.h5", "", "not an HDF5 file")
    with open(os.path.join(out, "not_hdf5_zeros.h5"), "wb") as f:
        f.write(bytes(4096))
    expect("not_hdf5_zeros.h5", "", "not an HDF5 file")
    # The 8-byte HDF5 signature followed by noise: passes H5Fis_hdf5, fails the superblock.
    rng = np.random.default_rng(7)
    with open(os.path.join(out, "signature_then_noise.h5"), "wb") as f:
        f.write(b"\x89HDF\r\n\x1a\n" + rng.integers(0, 256, 2048, dtype=np.uint8).tobytes())
    expect("signature_then_noise.h5", "", "not a readable HDF5 file")


def truncated(out):
    full = case(out, "truncated_source.tmp")
    data = open(full, "rb").read()
    os.remove(full)
    for name, size in (("truncated_at_half.h5", len(data) // 2),
                       ("truncated_after_superblock.h5", 96)):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data[:size])
        expect(name, "", "truncated or corrupt")


def ranks_and_shapes(out):
    case(out, "q_rank_1.h5", q=(8,))
    expect("q_rank_1.h5", "/case/q", "rank 1")
    case(out, "q_rank_5.h5", q=(1, 1, 2, 4, 8))
    expect("q_rank_5.h5", "/case/q", "rank 5")
    case(out, "k_rank_differs_from_q.h5", k=(2, 4, 8))
    expect("k_rank_differs_from_q.h5", "/case/k", "differs from q")
    case(out, "q_zero_seqlen.h5", q=(1, 2, 0, 8))
    expect("q_zero_seqlen.h5", "/case/q", "empty dimension")
    case(out, "k_zero_head_dim.h5", k=(1, 2, 4, 0))
    expect("k_zero_head_dim.h5", "/case/k", "empty dimension")
    case(out, "qkv_batch_mismatch.h5", q=(3, 2, 4, 8), k=(2, 2, 4, 8), v=(2, 2, 4, 8))
    expect("qkv_batch_mismatch.h5", "/case/k", "batch B 2")
    case(out, "qk_head_dim_mismatch.h5", k=(1, 2, 4, 16))
    expect("qk_head_dim_mismatch.h5", "/case/k", "head_dim D 16")
    case(out, "kv_heads_mismatch.h5", v=(1, 1, 4, 8))
    expect("kv_heads_mismatch.h5", "/case/v", "do not match k")
    case(out, "kv_heads_not_dividing_heads.h5", q=(1, 6, 4, 8), k=(1, 4, 4, 8), v=(1, 4, 4, 8))
    expect("kv_heads_not_dividing_heads.h5", "/case/k", "do not divide")
    case(out, "mask_not_broadcastable.h5", extra={"mask": np.ones((1, 1, 3, 4), dtype=bool)})
    expect("mask_not_broadcastable.h5", "/case/mask", "broadcast")
    case(out, "bias_not_broadcastable.h5",
         extra={"bias": np.zeros((1, 3, 4, 4), dtype=np.float32)})
    expect("bias_not_broadcastable.h5", "/case/bias", "broadcast")
    case(out, "lse_wrong_shape.h5", extra={"lse": np.zeros((1, 2, 5), dtype=np.float32)})
    expect("lse_wrong_shape.h5", "/case/lse", "lse")
    case(out, "missing_v.h5", skip=("v",))
    expect("missing_v.h5", "/case", "'v' is missing")
    with new_file(out, "scalar_q.h5") as f:
        g = f.create_group("case")
        dataset(g, "q", np.float32(1.0))
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("scalar_q.h5", "/case/q", "rank 0")
    with new_file(out, "null_dataspace_q.h5") as f:
        g = f.create_group("case")
        g.create_dataset("q", data=h5py.Empty("f4"))
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("null_dataspace_q.h5", "/case/q", "null dataspace")


def sizes(out):
    # Chunked and never written: the file stays tiny whatever the declared shape.
    with new_file(out, "dims_overflow_64bit.h5") as f:
        g = f.create_group("case")
        huge = 1 << 40
        dataset(g, "q", shape=(huge, huge, 2, 64), dtype="f4", chunks=(1, 1, 1, 64))
        dataset(g, "k", values((1, 2, 4, 64)))
        dataset(g, "v", values((1, 2, 4, 64)))
    expect("dims_overflow_64bit.h5", "/case/q", "64 bits")
    with new_file(out, "declared_size_4tib.h5") as f:
        g = f.create_group("case")
        dataset(g, "q", shape=(1, 1, 1 << 30, 1024), dtype="f4", chunks=(1, 1, 64, 1024))
        dataset(g, "k", shape=(1, 1, 1 << 30, 1024), dtype="f4", chunks=(1, 1, 64, 1024))
        dataset(g, "v", shape=(1, 1, 1 << 30, 1024), dtype="f4", chunks=(1, 1, 64, 1024))
    expect("declared_size_4tib.h5", "/case/q", "more than the limit")


def element_types(out):
    qkv = {"k": values((1, 2, 4, 8)), "v": values((1, 2, 4, 8))}

    def typed(name, q, problem, obj="/case/q", target="q"):
        with new_file(out, name) as f:
            g = f.create_group("case")
            data = dict(qkv, q=values((1, 2, 4, 8)))
            data[target] = q
            for n in ("q", "k", "v", "mask"):
                if n in data:
                    if isinstance(data[n], tuple) and data[n][0] is None:
                        dataset(g, n, shape=(1, 2, 4, 8), dtype=data[n][1])
                    elif isinstance(data[n], tuple):
                        dataset(g, n, data[n][0], dtype=data[n][1])
                    else:
                        dataset(g, n, data[n])
        expect(name, obj, problem)

    strings = np.array([[["a" * 3] * 8] * 4] * 2, dtype=object).reshape(1, 2, 4, 8)
    typed("string_q.h5", (strings, h5py.string_dtype()), "string element type")
    typed("fixed_string_q.h5", np.full((1, 2, 4, 8), b"abc", dtype="S3"), "string element type")
    compound = np.zeros((1, 2, 4, 8), dtype=[("re", "f4"), ("im", "f4")])
    typed("compound_q.h5", compound, "compound element type")
    colour = h5py.enum_dtype({"RED": 0, "GREEN": 1, "BLUE": 2}, basetype="i1")
    typed("enum_q.h5", (np.zeros((1, 2, 4, 8), dtype="i1"), colour), "enum element type")
    typed("enum_mask_not_bool.h5", (np.zeros((1, 1, 4, 4), dtype="i1"), colour),
          "enum element type", "/case/mask", "mask")
    vlen = np.empty((1, 2, 4, 8), dtype=object)
    for index in np.ndindex(vlen.shape):
        vlen[index] = np.arange(2, dtype="f4")
    typed("vlen_float_q.h5", (vlen, h5py.vlen_dtype("f4")), "variable-length element type")
    typed("array_type_q.h5", (None, np.dtype(("f4", (3,)))), "array element type")
    typed("integer_q.h5", np.zeros((1, 2, 4, 8), dtype="i4"), "integer element type int32")
    typed("complex_q.h5", np.zeros((1, 2, 4, 8), dtype="c8"), "compound element type")
    typed("float_mask.h5", np.ones((1, 1, 4, 4), dtype="f4"), "mask", "/case/mask", "mask")
    with new_file(out, "bf16_tag_on_float32.h5") as f:
        g = f.create_group("case")
        dataset(g, "q", values((1, 2, 4, 8))).attrs["dtype"] = "bfloat16"
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("bf16_tag_on_float32.h5", "/case/q", "4-byte elements tagged")
    with new_file(out, "opaque_q_untagged.h5") as f:
        g = f.create_group("case")
        dataset(g, "q", np.zeros((1, 2, 4, 8), dtype="V2"))
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("opaque_q_untagged.h5", "/case/q", "opaque element type")
    with new_file(out, "object_reference_q.h5") as f:
        g = f.create_group("case")
        refs = np.empty((1, 2, 4, 8), dtype=object)
        refs[...] = f.ref
        dataset(g, "q", refs, dtype=h5py.ref_dtype)
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("object_reference_q.h5", "/case/q", "reference element type")


def attributes(out):
    case(out, "nan_scale.h5", attrs={"scale": np.float64("nan")})
    expect("nan_scale.h5", "/case", "attribute 'scale' = nan")
    case(out, "inf_scale.h5", attrs={"scale": np.float32("inf")})
    expect("inf_scale.h5", "/case", "attribute 'scale' = inf")
    case(out, "nan_softcap.h5", attrs={"softcap": np.float64("nan")})
    expect("nan_softcap.h5", "/case", "attribute 'softcap' = nan")
    case(out, "string_scale.h5", attrs={"scale": "one over sqrt d"})
    expect("string_scale.h5", "/case", "attribute 'scale' is not a number")
    case(out, "array_scale.h5", attrs={"scale": np.array([0.1, 0.2, 0.3])})
    expect("array_scale.h5", "/case", "must hold a single value")
    case(out, "bad_layout_attribute.h5", attrs={"layout": "SBHD"})
    expect("bad_layout_attribute.h5", "/case", "attribute 'layout'")
    case(out, "fractional_step.h5", attrs={"step": 1.5})
    expect("fractional_step.h5", "/case", "is not an integer")


def links(out):
    with new_file(out, "external_link_q.h5") as f:
        g = f.create_group("case")
        g["q"] = h5py.ExternalLink("/etc/attnscope_elsewhere.h5", "/q")
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("external_link_q.h5", "/case/q", "external link")
    with new_file(out, "external_link_group.h5") as f:
        f["case"] = h5py.ExternalLink("elsewhere.h5", "/case")
    expect("external_link_group.h5", "/case", "external link")
    with new_file(out, "external_raw_storage.h5") as f:
        g = f.create_group("case")
        dataset(g, "q", shape=(1, 2, 4, 8), dtype="f4", external=[("/etc/passwd", 0, 256)])
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("external_raw_storage.h5", "/case/q", "external raw storage")
    with h5py.File(os.path.join(out, "virtual_dataset.h5"), "w", libver="latest") as f:
        gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
        gcpl.set_obj_track_times(False)
        g = h5py.Group(h5py.h5g.create(f.id, b"case", gcpl=gcpl))
        layout = h5py.VirtualLayout(shape=(1, 2, 4, 8), dtype="f4")
        layout[...] = h5py.VirtualSource("/etc/attnscope_elsewhere.h5", "q", shape=(1, 2, 4, 8))
        dcpl = layout._get_dcpl(f.filename)
        dcpl.set_obj_track_times(False)
        h5py.h5d.create(g.id, b"q", h5py.h5t.IEEE_F32LE, h5py.h5s.create_simple((1, 2, 4, 8)),
                        dcpl=dcpl)
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("virtual_dataset.h5", "/case/q", "virtual dataset")
    with new_file(out, "cyclic_soft_links.h5") as f:
        a = f.create_group("a")
        b = a.create_group("b")
        b["up"] = h5py.SoftLink("/a")
        b["loop"] = h5py.SoftLink("/a/b/loop")
        a["again"] = h5py.SoftLink("/a/b")
    expect("cyclic_soft_links.h5", "", "no case")
    with new_file(out, "cyclic_hard_links.h5") as f:
        a = f.create_group("a")
        b = a.create_group("b")
        b["root"] = f["/"]
        b["a"] = a
    expect("cyclic_hard_links.h5", "", "no case")
    with new_file(out, "dangling_soft_link_q.h5") as f:
        g = f.create_group("case")
        g["q"] = h5py.SoftLink("/nowhere/q")
        dataset(g, "k", values((1, 2, 4, 8)))
        dataset(g, "v", values((1, 2, 4, 8)))
    expect("dangling_soft_link_q.h5", "/case/q", "does not resolve")
    with new_file(out, "nested_100_levels.h5") as f:
        g = f["/"]
        for level in range(100):
            g = g.create_group("g%d" % level)
        for seed, n in enumerate("qkv"):
            dataset(g, n, values((1, 2, 4, 8), seed))
    expect("nested_100_levels.h5", "/g0/g1/g2", "deeper than 64 levels")
    with new_file(out, "alias_conflict_do_dout.h5") as f:
        g = f.create_group("case")
        for seed, n in enumerate("qkv"):
            dataset(g, n, values((1, 2, 4, 8), seed))
        dataset(g, "do", values((1, 2, 4, 8), 4))
        dataset(g, "dout", values((1, 2, 4, 8), 5))
    expect("alias_conflict_do_dout.h5", "/case/dout", "both 'do' and 'dout'")


def many_groups(out):
    with h5py.File(os.path.join(out, "thousands_of_empty_groups.h5"), "w", libver="latest") as f:
        for i in range(3000):
            f.create_group("step_%05d" % i, track_order=False)
    expect("thousands_of_empty_groups.h5", "", "no case")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "bad")
    os.makedirs(out, exist_ok=True)
    for make in (raw_files, truncated, ranks_and_shapes, sizes, element_types, attributes, links,
                 many_groups):
        make(out)
    chunk_corpus(out, expect)
    bug_report_corpus(out, expect)
    fuzz = sorted(n for n in os.listdir(out) if n.startswith("fuzz_"))
    previous = {}
    expected_path = os.path.join(out, "expected.json")
    if os.path.exists(expected_path):
        previous = json.load(open(expected_path))
    for name in fuzz:
        EXPECTED[name] = previous.get(name, {"object": "", "problem": ""})
    with open(expected_path, "w") as f:
        json.dump(dict(sorted(EXPECTED.items())), f, indent=1)
        f.write("\n")
    print("wrote %d files to %s" % (len(EXPECTED) - len(fuzz), out))


if __name__ == "__main__":
    main()
