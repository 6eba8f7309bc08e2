#!/usr/bin/env python3
"""Builds the fuzzer's seed corpus: the hostile corpus plus the sample dump's small cases.
The fuzz_*.h5 reproducers (HDF5 library faults) are left out: they would only re-report.

    make_seeds.py SAMPLE BAD_DIR OUT_DIR

The six sample cases taking the least space in the file (random tensors, about 110 KiB each)
are copied with their attributes and stored types into OUT_DIR/sample_<path>.h5.
"""
import os
import shutil
import sys

import h5py


def case_bytes(group):
    return sum(d.id.get_storage_size() for d in group.values() if isinstance(d, h5py.Dataset))


def main():
    sample, bad, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
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
    print("seeds:", len(os.listdir(out)))


if __name__ == "__main__":
    main()
