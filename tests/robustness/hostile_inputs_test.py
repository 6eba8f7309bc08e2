#!/usr/bin/env python3
"""Hostile inputs, second round (issue 42): every file is written here by h5py, torch, numpy,
safetensors or os (FIFOs, sockets, links), then given to attnscope-cli.

    hostile_inputs_test.py --cli CLI --work DIR TEST

TEST is one of
  outside_file    a soft link (to a group or to a tensor) whose path runs through an external
                  link, virtual datasets and external raw storage: scan / info / convert exit 2
                  naming the link, and an inotify trace proves the other file is never opened;
                  with --allow-external the same trace sees it opened (the trace works).
  special_files   a FIFO, /dev/stdin as a pipe, a process-substitution-like /dev/fd pipe, a
                  socket and /dev/null: exit 2 "not a regular file (it is ...)" well within the
                  timeout for scan (also with --probe-timeout), info, convert and merge; a run
                  folder lists its FIFO and a symbolic link leaving the folder as not read
                  (followed with --allow-external), scans the rest and exits 2.
  signed_bits     bf16 / fp16 bits stored as int16 (t.view(torch.int16)) and uint16 with a dtype
                  tag: every bit pattern survives `convert`; a tag on a 4-byte integer is refused.
  mask_values     integer masks holding 2 / -1 / 255 (HDF5 int64, int8, uint8; .npz and .pt
                  uint8) exit 2 naming the value and its index with a hint; an int64 0 / 1 mask
                  gives the findings of the same bool mask.
  sidecar_cap     a 400k-annotation sidecar (42 MB) is ignored at once by export with a note and
                  left untouched; a case of 6000 annotations draws 5000 and says so.
  pickle_protocols  torch.save with pickle protocols 1-5 reads the same tensors and scalars;
                  protocol 0 (which torch.load itself cannot read) is refused saying so.
  zip_duplicates  an .npz with two members named q.npy: "two archive members named 'q.npy'".
"""
import argparse
import ctypes
import hashlib
import io
import json
import os
import socket
import struct
import subprocess
import sys
import time
import warnings
import zipfile

import h5py
import numpy as np

FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)


def run(cli, *argv, timeout=120, stdin=subprocess.DEVNULL, pass_fds=()):
    return subprocess.run([cli, *argv], capture_output=True, text=True, timeout=timeout,
                          stdin=stdin, pass_fds=pass_fds)


def qkv(group, seed=0, shape=(1, 2, 8, 4)):
    rng = np.random.default_rng(seed)
    for name in ("q", "k", "v"):
        group[name] = rng.standard_normal(shape).astype(np.float32)


# ---- an open-file trace: inotify IN_OPEN on the files that must stay closed ----

_libc = ctypes.CDLL(None, use_errno=True)
IN_OPEN, IN_NONBLOCK = 0x20, 0o4000


def opened_during(paths, command):
    """Runs `command` (a callable) and returns (its result, the subset of `paths` opened)."""
    fd = _libc.inotify_init1(IN_NONBLOCK)
    assert fd >= 0, "inotify_init1 failed"
    watches = {}
    for p in paths:
        wd = _libc.inotify_add_watch(fd, os.fsencode(p), IN_OPEN)
        assert wd >= 0, "inotify_add_watch failed on " + p
        watches[wd] = p
    try:
        result = command()
        seen = set()
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            data = b""
        at = 0
        while at + 16 <= len(data):
            wd, _, _, length = struct.unpack_from("iIII", data, at)
            seen.add(watches[wd])
            at += 16 + length
        return result, seen
    finally:
        os.close(fd)


def outside_file(cli, work):
    other = os.path.join(work, "other.h5")
    with h5py.File(other, "w") as f:
        qkv(f.create_group("secret"), seed=7)
    raw = os.path.join(work, "raw.bin")
    np.random.default_rng(3).standard_normal(64).astype(np.float32).tofile(raw)
    files = {}
    files["soft_to_group"] = os.path.join(work, "soft_to_group.h5")
    with h5py.File(files["soft_to_group"], "w") as f:
        f["ext"] = h5py.ExternalLink("other.h5", "/")
        f["case"] = h5py.SoftLink("/ext/secret")
    files["soft_to_tensor"] = os.path.join(work, "soft_to_tensor.h5")
    with h5py.File(files["soft_to_tensor"], "w") as f:
        f["ext"] = h5py.ExternalLink("other.h5", "/")
        g = f.create_group("case")
        qkv(g, seed=1)
        del g["q"]
        g["q"] = h5py.SoftLink("/ext/secret/q")
    # The external link itself hidden under an ordinary group, reached only by a soft link.
    files["soft_via_nested_ext"] = os.path.join(work, "soft_via_nested_ext.h5")
    with h5py.File(files["soft_via_nested_ext"], "w") as f:
        f.create_group("hidden")["ext"] = h5py.ExternalLink("other.h5", "/secret")
        f["case"] = h5py.SoftLink("/hidden/ext")
    files["virtual"] = os.path.join(work, "virtual.h5")
    with h5py.File(files["virtual"], "w") as f:
        g = f.create_group("case")
        qkv(g, seed=2)
        del g["q"]
        layout = h5py.VirtualLayout(shape=(1, 2, 8, 4), dtype=np.float32)
        layout[:] = h5py.VirtualSource(other, "secret/q", shape=(1, 2, 8, 4))
        g.create_virtual_dataset("q", layout)
    files["external_storage"] = os.path.join(work, "external_storage.h5")
    with h5py.File(files["external_storage"], "w") as f:
        g = f.create_group("case")
        qkv(g, seed=3)
        del g["q"]
        g.create_dataset("q", shape=(1, 2, 8, 4), dtype="<f4", external=[(raw, 0, 256)])
    canaries = [other, raw]
    for name, path in files.items():
        for command in (["scan", path], ["info", path],
                        ["convert", path, "--out", os.path.join(work, name + "_out.h5")]):
            result, seen = opened_during(canaries, lambda: run(cli, *command))
            what = f"{name}: {command[0]}"
            check(result.returncode == 2, f"{what}: exit {result.returncode}: {result.stderr}")
            check(not seen, f"{what}: opened {sorted(seen)} outside the dump")
            check(path in result.stderr and "hint:" in result.stderr, f"{what}: {result.stderr}")
            check(not os.path.exists(os.path.join(work, name + "_out.h5")),
                  f"{what}: convert wrote output")
        if name.startswith("soft"):
            result = run(cli, "scan", path)
            check("external link" in result.stderr and "other.h5" in result.stderr,
                  f"{name}: the message does not name the external link: {result.stderr}")
    # The trace works: allowed, the same files are opened.
    for name in ("soft_to_group", "soft_to_tensor", "virtual", "external_storage"):
        result, seen = opened_during(canaries,
                                     lambda: run(cli, "scan", "--allow-external", files[name]))
        check(result.returncode in (0, 1), f"{name} allowed: {result.stderr}")
        check(bool(seen), f"{name} allowed: the open-file trace saw nothing")


def special_files(cli, work):
    fifo = os.path.join(work, "pipe.h5")
    os.mkfifo(fifo)
    sock_path = os.path.join(work, "sock.h5")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    good = os.path.join(work, "good.h5")
    with h5py.File(good, "w") as f:
        qkv(f.create_group("case"))
    expectations = [(fifo, "a named pipe (FIFO)"), (sock_path, "a socket"),
                    ("/dev/null", "a character device")]
    for path, kind in expectations:
        commands = [["scan", path], ["scan", "--probe-timeout", "5", path], ["info", path],
                    ["convert", path, "--out", os.path.join(work, "out.h5")],
                    ["merge", path]]
        for command in commands:
            start = time.monotonic()
            result = run(cli, *command, timeout=60)
            what = f"{' '.join(command)}"
            check(result.returncode == 2, f"{what}: exit {result.returncode}")
            check(f"not a regular file (it is {kind})" in result.stderr, f"{what}: {result.stderr}")
            check(time.monotonic() - start < 30, f"{what}: took {time.monotonic() - start:.0f} s")
    # A pipe on stdin, and a pipe passed as /dev/fd/N (what bash's <(...) gives).
    reader, writer = os.pipe()
    with open(good, "rb") as f:
        os.write(writer, f.read(4096))
    result = run(cli, "scan", "/dev/stdin", stdin=reader, timeout=60)
    check(result.returncode == 2 and "not a regular file (it is a named pipe (FIFO))"
          in result.stderr, f"scan /dev/stdin (pipe): {result.returncode} {result.stderr}")
    result = run(cli, "scan", f"/dev/fd/{reader}", pass_fds=(reader,), timeout=60)
    check(result.returncode == 2 and "not a regular file" in result.stderr,
          f"scan /dev/fd/N: {result.returncode} {result.stderr}")
    os.close(reader)
    os.close(writer)
    # A regular file on stdin is read.
    with open(good, "rb") as f:
        result = run(cli, "scan", "/dev/stdin", stdin=f)
    check(result.returncode == 0, f"scan /dev/stdin (file): {result.returncode} {result.stderr}")
    # A run folder: its FIFO and a link leaving the folder are listed, the rest is scanned.
    folder = os.path.join(work, "run")
    os.makedirs(folder)
    with h5py.File(os.path.join(folder, "rank_00000.h5"), "w") as f:
        qkv(f.create_group("case"))
    os.mkfifo(os.path.join(folder, "rank_00001.h5"))
    os.symlink(good, os.path.join(folder, "rank_00002.h5"))
    os.symlink("rank_00000.h5", os.path.join(folder, "rank_00003.h5"))  # inside: followed
    result = run(cli, "scan", "--json", folder, timeout=60)
    check(result.returncode == 2, f"run folder: exit {result.returncode}")
    doc = json.loads(result.stdout)
    broken = {b["path"]: b["message"] for b in doc["broken"]}
    check(set(broken) == {"rank_00001.h5", "rank_00002.h5"}, f"run folder broken: {broken}")
    check("not a regular file" in broken.get("rank_00001.h5", ""), f"fifo: {broken}")
    check("outside the run folder" in broken.get("rank_00002.h5", ""), f"link: {broken}")
    check(len(doc["cases"]) == 2, f"run folder scanned {len(doc['cases'])} cases, want 2")
    result = run(cli, "scan", "--json", "--allow-external", folder, timeout=60)
    doc = json.loads(result.stdout)
    check([b["path"] for b in doc["broken"]] == ["rank_00001.h5"],
          f"run folder allowed: {doc['broken']}")
    check(len(doc["cases"]) == 3, f"run folder allowed scanned {len(doc['cases'])} cases")
    server.close()


def signed_bits(cli, work):
    import torch
    path = os.path.join(work, "bits.h5")
    # Every 16-bit pattern, negative (sign bit set) ones included, as q; k, v ordinary.
    bits = np.arange(65536, dtype=np.uint16)
    with h5py.File(path, "w") as f:
        for name, tag, signed in (("bf16_int16", "bfloat16", True),
                                  ("bf16_uint16", "bfloat16", False),
                                  ("f16_int16", "float16", True)):
            g = f.create_group(name)
            q = bits.view(np.int16) if signed else bits
            g.create_dataset("q", data=q.reshape(1, 1, 256, 256)).attrs["dtype"] = tag
            for other in ("k", "v"):
                t = torch.randn(1, 1, 256, 256).to(
                    torch.bfloat16 if tag == "bfloat16" else torch.float16)
                g.create_dataset(other, data=t.view(torch.int16).numpy()).attrs["dtype"] = tag
            g.attrs["dtype"] = tag
    out = os.path.join(work, "bits_out.h5")
    result = run(cli, "convert", path, "--out", out)
    check(result.returncode == 0, f"convert: {result.returncode} {result.stderr}")
    if result.returncode == 0:
        with h5py.File(out, "r") as f, h5py.File(path, "r") as src:
            for name in ("bf16_int16", "bf16_uint16", "f16_int16"):
                q = f[name]["q"][...]
                back = q.view(np.uint16).ravel()
                check(np.array_equal(back, bits), f"{name}: bits changed "
                      f"({int((back != bits).sum())} of 65536)")
                k = src[name]["k"][...].view(np.uint16)
                check(np.array_equal(f[name]["k"][...].view(np.uint16), k), f"{name}: k changed")
    wide = os.path.join(work, "tag_on_int32.h5")
    with h5py.File(wide, "w") as f:
        g = f.create_group("case")
        qkv(g)
        del g["q"]
        g.create_dataset("q", data=np.zeros((1, 2, 8, 4), np.int32)).attrs["dtype"] = "bfloat16"
    result = run(cli, "scan", wide)
    check(result.returncode == 2 and "4-byte elements tagged" in result.stderr,
          f"bf16 tag on int32: {result.returncode} {result.stderr}")


def mask_values(cli, work):
    import torch
    shape = (1, 2, 8, 8)
    cases = {  # name: (file, expected value text, expected index text)
        "mask_int64.h5": (np.int64, "holds 2 at [0, 1]"),
        "mask_int64_neg.h5": (np.int64, "holds -1 at [0, 2]"),
        "mask_int8.h5": (np.int8, "holds -1 at [0, 2]"),
        "mask_uint8.h5": (np.uint8, "holds 255 at [0, 3]"),
    }
    rows = {"mask_int64.h5": [1, 2, 1, 1, 1, 1, 1, 1], "mask_int64_neg.h5": [1, 1, -1, 1, 1, 1, 1, 1],
            "mask_int8.h5": [1, 1, -1, 1, 1, 1, 1, 1], "mask_uint8.h5": [1, 1, 1, 255, 1, 1, 1, 1]}
    for name, (dtype, text) in cases.items():
        path = os.path.join(work, name)
        mask = np.ones((8, 8), dtype=np.int64)
        mask[0] = rows[name]
        with h5py.File(path, "w") as f:
            g = f.create_group("case")
            qkv(g)
            g["mask"] = mask.astype(dtype)
        result = run(cli, "scan", path)
        check(result.returncode == 2, f"{name}: exit {result.returncode}")
        check(f"{path}: /case/mask: {text}" in result.stderr and "additive" in result.stderr,
              f"{name}: {result.stderr}")
    # .npz and .pt uint8 masks holding 255.
    rng = np.random.default_rng(0)
    arrays = {n: rng.standard_normal(shape).astype(np.float32) for n in "qkv"}
    bad = np.ones((8, 8), np.uint8)
    bad[3, 5] = 255
    npz = os.path.join(work, "mask255.npz")
    np.savez(npz, mask=bad, **arrays)
    pt = os.path.join(work, "mask255.pt")
    torch.save({"mask": torch.from_numpy(bad), **{n: torch.from_numpy(a) for n, a in arrays.items()}}, pt)
    for path in (npz, pt):
        result = run(cli, "scan", path)
        check(result.returncode == 2 and "holds 255 at [3, 5]" in result.stderr,
              f"{os.path.basename(path)}: {result.returncode} {result.stderr}")
    # 0 / 1 integers read like the bool mask.
    causal = np.tril(np.ones((8, 8), dtype=bool))
    findings = []
    for name, mask in (("mask_bool.h5", causal), ("mask_01.h5", causal.astype(np.int64))):
        path = os.path.join(work, name)
        with h5py.File(path, "w") as f:
            g = f.create_group("case")
            qkv(g)
            g["mask"] = mask
        result = run(cli, "scan", "--json", path)
        check(result.returncode in (0, 1), f"{name}: {result.returncode} {result.stderr}")
        findings.append(json.loads(result.stdout)["cases"][0]["findings"] if result.stdout else None)
    check(findings[0] == findings[1], f"int 0/1 mask differs from bool: {findings}")


def sidecar_cap(cli, work):
    import shutil
    sample = os.path.join(os.path.dirname(__file__), "..", "..", "resources", "samples",
                          "seed_cases.h5")
    dump = os.path.join(work, "side.h5")
    shutil.copy(sample, dump)
    sidecar = dump + ".attnscope.json"
    case = "/train/step_000/layer_00"

    def write(count):
        notes = [{"kind": "text", "view": "S", "batch": 0, "head": 0, "from": [i % 64, i % 61],
                  "to": [i % 64, i % 61], "text": f"note {i}"} for i in range(count)]
        doc = {"format": "attnscope-session", "version": 2,
               "cases": {case: {"batch": 0, "head": 0, "view": "S", "annotations": notes}}}
        with open(sidecar, "w") as f:
            json.dump(doc, f)
        return hashlib.sha256(open(sidecar, "rb").read()).hexdigest()

    before = write(400000)
    start = time.monotonic()
    result = run(cli, "export", f"{dump}::{case}", "--view", "S", "--out",
                 os.path.join(work, "big.png"), timeout=120)
    took = time.monotonic() - start
    check(result.returncode == 0, f"400k: exit {result.returncode} {result.stderr}")
    check("larger than the 16 MB a session file may hold; ignored" in result.stderr,
          f"400k: no note: {result.stderr}")
    check(hashlib.sha256(open(sidecar, "rb").read()).hexdigest() == before, "400k: sidecar changed")
    print(f"400k-annotation sidecar: export in {took:.1f} s")
    write(6000)
    result = run(cli, "export", f"{dump}::{case}", "--view", "S", "--out",
                 os.path.join(work, "6k.png"), timeout=120)
    check(result.returncode == 0, f"6000: exit {result.returncode} {result.stderr}")
    check("6000 annotations, more than the 5000 attnscope shows per case" in result.stderr,
          f"6000: no note: {result.stderr}")


def pickle_protocols(cli, work):
    import torch
    tensors = {n: torch.randn(1, 2, 8, 4) for n in ("q", "k", "v")}
    payload = dict(tensors, causal=True, scale=0.375, name="proto")
    reference = None
    for protocol in range(6):
        path = os.path.join(work, f"proto{protocol}.pt")
        torch.save(payload, path, pickle_protocol=protocol)
        result = run(cli, "scan", "--json", path)
        if protocol == 0:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    torch.load(path, weights_only=False)
                    loads = True
                except Exception:
                    loads = False
            check(not loads, "torch.load now reads protocol 0: attnscope should read it too")
            check(result.returncode == 2 and "pickle protocol 0" in result.stderr and
                  "torch.load cannot read such a file either" in result.stderr,
                  f"protocol 0: {result.returncode} {result.stderr}")
            continue
        check(result.returncode in (0, 1), f"protocol {protocol}: {result.returncode} {result.stderr}")
        if not result.stdout:
            continue
        case = json.loads(result.stdout)["cases"][0]
        config = case["config"]
        check(config["scale"] == 0.375 and config["causal"] is True,
              f"protocol {protocol}: config {config}")
        out = os.path.join(work, f"proto{protocol}.h5")
        run(cli, "convert", path, "--out", out)
        with h5py.File(out, "r") as f:
            got = {n: f["case"][n][...] for n in ("q", "k", "v")}
        for n, t in tensors.items():
            check(np.array_equal(got[n], t.numpy()), f"protocol {protocol}: {n} differs")
        reference = reference or case["findings"]
        check(case["findings"] == reference, f"protocol {protocol}: findings differ")


def zip_duplicates(cli, work):
    path = os.path.join(work, "dup.npz")
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(path, "w") as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("q", "k", "v", "q"):
            buffer = io.BytesIO()
            np.save(buffer, rng.standard_normal((1, 2, 8, 4)).astype(np.float32))
            z.writestr(name + ".npy", buffer.getvalue())
    result = run(cli, "scan", path)
    check(result.returncode == 2 and "two archive members named 'q.npy'" in result.stderr,
          f"duplicate member: {result.returncode} {result.stderr}")


TESTS = {f.__name__: f for f in (outside_file, special_files, signed_bits, mask_values,
                                 sidecar_cap, pickle_protocols, zip_duplicates)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("test", choices=sorted(TESTS))
    args = parser.parse_args()
    work = os.path.join(args.work, args.test)
    if os.path.isdir(work):
        import shutil
        shutil.rmtree(work)
    os.makedirs(work)
    TESTS[args.test](args.cli, work)
    for failure in FAILURES:
        print("FAIL:", failure, file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
