"""Hostile .pt / .npz / .npy / .safetensors files (issue 16), crafted byte by byte.

Used by make_bad_corpus.py. The pickles are assembled from opcodes (no torch needed) and the
zip archives written with fixed timestamps, so the files are deterministic. Each must be
refused (exit 2) with the file, the object and the problem named; the pickles that would call
os.system / posix.system / builtins.eval are refused where the global is named, never run (their
payload would only `touch attnscope_payload_ran`).
"""
import os
import struct
import zipfile
import zlib

import numpy as np

PAYLOAD = "touch attnscope_payload_ran"
QKV_SHAPE = (1, 2, 4, 8)


# ---- pickle assembly ----
def text(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def glob(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def small(i):
    return b"K" + bytes([i])


def long4(i):
    return b"J" + struct.pack("<i", i)


def tensor(key, storage_type, numel, offset, size, stride):
    """_rebuild_tensor_v2 of storage `key` as torch.save pickles it (protocol 2)."""
    tup = lambda xs: b"(" + b"".join(long4(x) for x in xs) + b"t"
    pid = b"(" + text("storage") + glob("torch", storage_type) + text(key) + text("cpu")
    pid += b"\x8a\x08" + struct.pack("<q", numel) + b"t"
    return (glob("torch._utils", "_rebuild_tensor_v2") + b"(" + pid + b"Q" + long4(offset) +
            tup(size) + tup(stride) + b"\x89" + glob("collections", "OrderedDict") + b")R" +
            b"tR")


def qkv_dict(q_numel=64, q_offset=0, q_size=QKV_SHAPE):
    """A dict pickle {'q': ..., 'k': ..., 'v': ...} over storages 0, 1, 2 of 64 float32."""
    stride = (64, 32, 8, 1)
    body = b"}(" + text("q") + tensor("0", "FloatStorage", q_numel, q_offset, q_size, stride)
    for key, name in (("1", "k"), ("2", "v")):
        body += text(name) + tensor(key, "FloatStorage", 64, 0, QKV_SHAPE, stride)
    return b"\x80\x02" + body + b"u."


def storages():
    values = ((np.arange(64) % 13) / 8.0).astype("<f4").tobytes()
    return {"archive/data/%d" % i: values for i in range(3)}


# ---- files ----
def write_zip(path, members, deflate=()):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED
            z.writestr(info, data)


def write_pt(out, name, pickle, extra=None, deflate=False):
    members = {"archive/data.pkl": pickle, "archive/byteorder": b"little",
               "archive/version": b"3\n"}
    members.update(extra if extra is not None else storages())
    write_zip(os.path.join(out, name), members, ("archive/data.pkl",) if deflate else ())


def npy(array, descr=None, header_shape=None):
    """A version-1.0 .npy of `array`, optionally lying about its descr or shape."""
    shape = array.shape if header_shape is None else header_shape
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        descr or array.dtype.str, repr(tuple(shape)))
    header = header.encode() + b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + array.tobytes()


def f32(shape, seed=0):
    n = int(np.prod(shape))
    return (((np.arange(n) * 37 + seed * 11) % 101 - 50) / 16.0).astype("<f4").reshape(shape)


def safetensors(out, name, header, data=b"", length=None):
    body = header.encode() if isinstance(header, str) else header
    size = len(body) if length is None else length
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<Q", size) + body + data)


def pickles(out, expect):
    call = text(PAYLOAD) + b"\x85R"
    write_pt(out, "pt_global_os_system.pt", b"\x80\x02}(" + text("q") + glob("os", "system") +
             call + b"u.")
    expect("pt_global_os_system.pt", "archive/data.pkl", "refuses the global 'os.system'")
    write_pt(out, "pt_stack_global_posix_system.pt",
             b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00}(" + text("q") + text("posix") +
             text("system") + b"\x93" + call + b"u.")
    expect("pt_stack_global_posix_system.pt", "archive/data.pkl",
           "refuses the global 'posix.system'")
    write_pt(out, "pt_builtins_eval.pt", b"\x80\x02" + glob("builtins", "eval") +
             text("__import__('os').system('" + PAYLOAD + "')") + b"\x85R.")
    expect("pt_builtins_eval.pt", "archive/data.pkl", "refuses the global 'builtins.eval'")
    write_pt(out, "pt_nested_lists_100000.pt",
             b"\x80\x02" + b"]" * 100000 + b"a" * 99999 + b".", deflate=True)
    expect("pt_nested_lists_100000.pt", "", "nested deeper than 64 levels")
    write_pt(out, "pt_mark_bomb.pt", b"\x80\x02" + b"(" * 70000 + b"N.", deflate=True)
    expect("pt_mark_bomb.pt", "archive/data.pkl", "MARKs nested deeper than 65536")
    write_pt(out, "pt_dup_bomb.pt", b"\x80\x02N" + b"2" * ((1 << 21) + 10) + b".",
             deflate=True)
    expect("pt_dup_bomb.pt", "archive/data.pkl", "stack grows past its limit")
    write_pt(out, "pt_memo_huge_index.pt", b"\x80\x02}(" + text("q") + b"j\xff\xff\xff\xffu.")
    expect("pt_memo_huge_index.pt", "archive/data.pkl", "memo key 4294967295 was never stored")
    # a = [None]; 40 times a = [a, a]: a DAG of 2^40 paths in 40 lists.
    laughs = b"\x80\x02]N" + b"a" + b"q\x00"
    for _ in range(40):
        laughs += b"(h\x00h\x00l" + b"q\x00"
    write_pt(out, "pt_billion_laughs.pt", laughs + b".")
    expect("pt_billion_laughs.pt", "", "values to walk (containers repeat themselves)")
    write_pt(out, "pt_storage_2e60_elements.pt", qkv_dict(q_numel=1 << 60))
    expect("pt_storage_2e60_elements.pt", "/case/q", "its storage declares 1152921504606846976")
    write_pt(out, "pt_view_beyond_storage.pt", qkv_dict(q_offset=40))
    expect("pt_view_beyond_storage.pt", "/case/q", "reaches beyond its storage")
    missing = storages()
    del missing["archive/data/0"]
    write_pt(out, "pt_missing_storage.pt", qkv_dict(), extra=missing)
    expect("pt_missing_storage.pt", "/case/q", "is not in the archive")
    write_pt(out, "pt_single_tensor.pt",
             b"\x80\x02" + tensor("0", "BFloat16Storage", 128, 0, (4, 2, 4, 4), (32, 16, 4, 1)) +
             b".")
    expect("pt_single_tensor.pt", "", "holds a single tensor of shape [4, 2, 4, 4]")
    with open(os.path.join(out, "pt_legacy_bare_pickle.pt"), "wb") as f:
        f.write(b"\x80\x02\x8a\x0alp\xfc\x9cF\xf9 j\xa8P\x19.")
    expect("pt_legacy_bare_pickle.pt", "", "bare pickle stream")
    write_zip(os.path.join(out, "zip_neither_pt_nor_npz.pt"), {"readme.txt": b"hello"})
    expect("zip_neither_pt_nor_npz.pt", "", "neither a torch.save file")


def npz(out, expect):
    q, k, v = (npy(f32(QKV_SHAPE, s)) for s in range(3))
    write_zip(os.path.join(out, "npz_truncated_npy.npz"),
              {"q.npy": q[:-100], "k.npy": k, "v.npy": v})
    expect("npz_truncated_npy.npz", "/case/q", "truncated .npy")
    write_zip(os.path.join(out, "npz_object_array.npz"),
              {"q.npy": npy(f32(QKV_SHAPE), descr="|O"), "k.npy": k, "v.npy": v})
    expect("npz_object_array.npz", "/case/q", "an object array holds pickles")
    write_zip(os.path.join(out, "npz_header_declares_8gib.npz"),
              {"q.npy": npy(f32(QKV_SHAPE), header_shape=(1, 1, 1 << 20, 1 << 11)), "k.npy": k,
               "v.npy": v})
    expect("npz_header_declares_8gib.npz", "/case/q", "truncated .npy")
    # A deflated member whose sizes claim 4 GiB from a few hundred compressed bytes.
    path = os.path.join(out, "npz_zip_bomb_declared_4gib.npz")
    write_zip(path, {"q.npy": q, "k.npy": k, "v.npy": v}, deflate=("q.npy",))
    patch_sizes(path, "q.npy", 0xfffffff0)
    expect("npz_zip_bomb_declared_4gib.npz", "q.npy", "more than deflate can produce (a zip bomb)")
    # A deflated member that inflates to 4 MiB while its sizes say the 384 bytes of q.
    path = os.path.join(out, "npz_inflates_past_declared_size.npz")
    write_zip(path, {"q.npy": q + bytes(4 << 20), "k.npy": k, "v.npy": v}, deflate=("q.npy",))
    patch_sizes(path, "q.npy", len(q))
    expect("npz_inflates_past_declared_size.npz", "q.npy", "inflates past its declared 384 bytes")
    with open(os.path.join(out, "single_array.npy"), "wb") as f:
        f.write(q)
    expect("single_array.npy", "", "a single .npy array")


def patch_sizes(path, member, size):
    """Rewrites the uncompressed size of `member` in its local header and central entry."""
    data = bytearray(open(path, "rb").read())
    name = member.encode()
    local = data.find(b"PK\x03\x04" + b"\x14\x00")
    while data[local + 30:local + 30 + len(name)] != name:
        local = data.find(b"PK\x03\x04", local + 4)
    struct.pack_into("<I", data, local + 22, size)
    central = data.find(b"PK\x01\x02")
    while data[central + 46:central + 46 + len(name)] != name:
        central = data.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<I", data, central + 24, size)
    open(path, "wb").write(bytes(data))


def safetensors_files(out, expect):
    q = f32(QKV_SHAPE).tobytes()
    entry = lambda name, begin, end, dtype="F32": (
        '"%s": {"dtype": "%s", "shape": [1, 2, 4, 8], "data_offsets": [%d, %d]}' %
        (name, dtype, begin, end))
    good = "{" + ", ".join(entry(n, 256 * i, 256 * (i + 1)) for i, n in enumerate("qkv")) + "}"
    safetensors(out, "st_header_length_beyond_file.safetensors", good, q * 3, length=1 << 40)
    expect("st_header_length_beyond_file.safetensors", "", "is larger than the file")
    safetensors(out, "st_header_longer_than_file.safetensors", good, q, length=len(good) + 800)
    expect("st_header_longer_than_file.safetensors", "", "is larger than the file")
    overlap = "{" + ", ".join(entry(n, 128 * i, 128 * i + 256) for i, n in enumerate("qkv")) + "}"
    safetensors(out, "st_offsets_overlap.safetensors", overlap, q * 3)
    expect("st_offsets_overlap.safetensors", "", "overlap in the data buffer")
    beyond = "{" + ", ".join(entry(n, 256 * i, 256 * (i + 1)) for i, n in enumerate("qkv")) + "}"
    safetensors(out, "st_offsets_beyond_data.safetensors", beyond, q * 2)
    expect("st_offsets_beyond_data.safetensors", "", "lie outside the data buffer")
    short = "{" + ", ".join(entry(n, 256 * i, 256 * i + 200) for i, n in enumerate("qkv")) + "}"
    safetensors(out, "st_offsets_size_mismatch.safetensors", short, q * 3)
    expect("st_offsets_size_mismatch.safetensors", "", "need 256")
    safetensors(out, "st_header_not_json.safetensors", "{'q': torch.randn(4)}", q)
    expect("st_header_not_json.safetensors", "", "not a JSON object")
    safetensors(out, "st_header_nested_10000.safetensors",
                '{"q": ' + "[" * 10000 + "]" * 10000 + "}", q)
    expect("st_header_nested_10000.safetensors", "", "nests deeper")
    ints = "{" + ", ".join(entry(n, 256 * i, 256 * (i + 1), "I32" if n == "q" else "F32")
                           for i, n in enumerate("qkv")) + "}"
    safetensors(out, "st_int32_q.safetensors", ints, q * 3)
    expect("st_int32_q.safetensors", "/case/q", "element type int32 where floats are expected")


def bug_report_corpus(out, expect):
    pickles(out, expect)
    npz(out, expect)
    safetensors_files(out, expect)
