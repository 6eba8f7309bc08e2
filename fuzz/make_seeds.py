#!/usr/bin/env python3
"""Builds the fuzzers' seed corpora, one folder per target under OUT_DIR.

    make_seeds.py SAMPLE BAD_DIR OUT_DIR

    dump_reader_fuzz   the hostile corpus's .h5 files plus the six sample cases taking the least
                       space in the file (copied with their attributes and stored types), and
                       the packed-sequence sample next to it
    zip_dump_fuzz      the hostile .pt / .npz files plus small valid ones written by torch.save
                       and numpy.savez / savez_compressed (a dict, a list, nested layers, bf16
                       views, a Fortran-order array, packed THD with cu_seqlens)
    pickle_fuzz        the data.pkl of every .pt above
    safetensors_fuzz   the hostile .safetensors files plus two written by safetensors (one packed)
    run_folder_fuzz    recipes for a run folder of ranks, a FIFO, links leaving the folder and a
                       link loop (run_folder_fuzz.cpp reads a recipe byte by byte)
    session_fuzz       sidecar session files: a full one (zooms, views, every annotation kind, a
                       newer version's unknown fields), an empty one and two damaged ones

The fuzz_*.h5 reproducers (HDF5 library faults) are left out: they would only re-report.
"""
import json
import os
import shutil
import sys
import zipfile

import h5py
import numpy as np
import torch
from safetensors.torch import save_file


def case_bytes(group):
    return sum(d.id.get_storage_size() for d in group.values() if isinstance(d, h5py.Dataset))


def hdf5_seeds(sample, bad, out):
    for name in sorted(os.listdir(bad)):
        if name.endswith(".h5") and not name.startswith("fuzz_"):
            shutil.copy(os.path.join(bad, name), os.path.join(out, "bad_" + name))
    cases = []
    with h5py.File(sample, "r") as f:
        f.visititems(lambda path, obj: cases.append(path)
                     if isinstance(obj, h5py.Group) and "q" in obj else None)
        for path in sorted(cases, key=lambda p: (case_bytes(f[p]), p))[:6]:
            name = "sample_" + path.replace("/", "_") + ".h5"
            with h5py.File(os.path.join(out, name), "w") as seed:
                for key, value in f.attrs.items():
                    seed.attrs[key] = value
                f.copy(f[path], seed, name="/" + path)


def zip_seeds(bad, out):
    for name in sorted(os.listdir(bad)):
        if name.endswith((".pt", ".npz")):
            shutil.copy(os.path.join(bad, name), os.path.join(out, "bad_" + name))
    g = torch.Generator().manual_seed(7)
    t = lambda *s, dtype=torch.float32: torch.randn(*s, generator=g).to(dtype)
    qkv = t(1, 3, 3, 2, 4, dtype=torch.bfloat16)
    torch.save({"q": t(1, 2, 3, 4), "k": t(1, 2, 3, 4), "v": t(1, 2, 3, 4), "out_grad":
                t(1, 2, 3, 4), "scale": 0.5, "is_causal": True}, os.path.join(out, "flat.pt"))
    torch.save({"step_1": {"layer_%d" % i: {"query": qkv[:, :, 0].transpose(1, 2), "key":
                qkv[:, :, 1].transpose(1, 2), "value": qkv[:, :, 2].transpose(1, 2)}
                for i in range(2)}}, os.path.join(out, "nested_views.pt"))
    torch.save([{"q": t(2, 4), "k": t(3, 4), "v": t(3, 4), "mask": t(2, 3) > 0}],
               os.path.join(out, "list.pt"), pickle_protocol=4)
    arrays = {"q": t(1, 2, 3, 4).numpy(), "k": np.asfortranarray(t(1, 2, 3, 4).numpy()),
              "v": t(1, 2, 3, 4).numpy().astype(np.float16), "scale": np.float64(0.3)}
    np.savez(os.path.join(out, "plain.npz"), **arrays)
    np.savez_compressed(os.path.join(out, "compressed.npz"),
                        **{"layer_0/" + k: v for k, v in arrays.items()})
    packed = {"q": t(7, 2, 4), "k": t(9, 1, 4), "v": t(9, 1, 4), "is_causal": True,
              "cu_seqlens_q": torch.tensor([0, 3, 7], dtype=torch.int32),
              "cu_seqlens_k": torch.tensor([0, 4, 9], dtype=torch.int32)}
    torch.save(packed, os.path.join(out, "packed.pt"))
    np.savez(os.path.join(out, "packed.npz"), **{k: np.asarray(v) for k, v in packed.items()})


def pickle_seeds(zips, out):
    for name in sorted(os.listdir(zips)):
        if not name.endswith(".pt"):
            continue
        try:
            with zipfile.ZipFile(os.path.join(zips, name)) as z:
                pickles = [n for n in z.namelist() if n.endswith("data.pkl")]
                if pickles:
                    with open(os.path.join(out, name[:-3] + ".pkl"), "wb") as f:
                        f.write(z.read(pickles[0]))
        except (zipfile.BadZipFile, OSError):
            pass


def safetensors_seeds(bad, out):
    for name in sorted(os.listdir(bad)):
        if name.endswith(".safetensors"):
            shutil.copy(os.path.join(bad, name), os.path.join(out, "bad_" + name))
    g = torch.Generator().manual_seed(8)
    t = lambda *s: torch.randn(*s, generator=g).to(torch.bfloat16)
    save_file({"q": t(1, 2, 3, 4), "k": t(1, 2, 3, 4), "v": t(1, 2, 3, 4),
               "layer_1.q": t(2, 4), "layer_1.k": t(3, 4), "layer_1.v": t(3, 4)},
              os.path.join(out, "valid.safetensors"), metadata={"scale": "0.5"})
    save_file({"q": t(7, 2, 4), "k": t(7, 2, 4), "v": t(7, 2, 4),
               "cu_seqlens": torch.tensor([0, 2, 7], dtype=torch.int64)},
              os.path.join(out, "packed.safetensors"), metadata={"layout": "THD"})


def run_folder_seeds(out):
    # Each record: op (0 folder, 1 file, 2 FIFO, 3-5 link), then the name's parts (count, then
    # per part its length and letters), the suffix, and for a link the target choice.
    recipes = {
        "ranks": bytes([1, 0, 5, 2, 3, 4, 5, 0, 1, 0, 5, 2, 3, 4, 6, 0]),
        "fifo_and_links": bytes([2, 0, 3, 0, 1, 2, 0, 3, 0, 2, 1, 2, 1, 4, 0, 3, 0, 3, 3, 4, 1, 2]),
        "nested_loop": bytes([0, 1, 2, 0, 1, 5, 4, 1, 2, 0, 1, 0, 1, 1, 3, 1, 2, 0, 0, 0, 2]),
    }
    for name, recipe in recipes.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(recipe)


def session_seeds(out):
    note = {"kind": "text", "view": "S", "batch": 0, "head": 1, "from": [1, 2], "to": [1, 2],
            "text": "first NaN"}
    arrow = dict(note, kind="arrow", to=[5.5, 7])
    box = dict(note, kind="box", to=[9, 9], text="")
    full = {"format": "attnscope-session", "version": 3, "future": {"x": 1},
            "last_case": "/step_1/layer_0",
            "settings": {"precision": "fp16", "mode": "unfused", "scale": 0.125},
            "cases": {"/step_1/layer_0": {
                "batch": 0, "head": 1, "view": "P", "zoom": [0, 8, 0, 8],
                "zooms": {"S": [0, 4, 0, 4], "P": [2, 1, 0, 3]},
                "views": {"S": {"colormap": "diverging", "scale": "log", "range": [-1, 1]}},
                "annotations": [note, arrow, box, {"kind": "star"}],
                "unreadable_annotations": [{"kind": "future"}], "extra": [1, 2]}}}
    seeds = {"full.json": json.dumps(full), "empty.json": json.dumps({"format": "attnscope-session"}),
             "cases_not_object.json": json.dumps({"format": "attnscope-session", "cases": []}),
             "truncated.json": json.dumps(full)[:150]}
    for name, text in seeds.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)


def main():
    sample, bad, out = sys.argv[1:4]
    folders = {name: os.path.join(out, name) for name in
               ("dump_reader_fuzz", "zip_dump_fuzz", "pickle_fuzz", "safetensors_fuzz",
                "run_folder_fuzz", "session_fuzz")}
    for folder in folders.values():
        os.makedirs(folder, exist_ok=True)
    hdf5_seeds(sample, bad, folders["dump_reader_fuzz"])
    packed = os.path.join(os.path.dirname(sample), "packed_sequences.h5")
    shutil.copy(packed, os.path.join(folders["dump_reader_fuzz"], "sample_packed_sequences.h5"))
    zip_seeds(bad, folders["zip_dump_fuzz"])
    pickle_seeds(folders["zip_dump_fuzz"], folders["pickle_fuzz"])
    safetensors_seeds(bad, folders["safetensors_fuzz"])
    run_folder_seeds(folders["run_folder_fuzz"])
    session_seeds(folders["session_fuzz"])
    for name, folder in folders.items():
        print("seeds of %s: %d" % (name, len(os.listdir(folder))))


if __name__ == "__main__":
    main()
