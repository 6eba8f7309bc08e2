"""Writes a dump of many small cases with h5py, for the scan streaming / parallel / SIGINT tests.

usage: make_many_cases.py OUT.h5 [COUNT]
Cases /many/case_00000 .. : q, k, v, do of shape [1, 2, 8, 8] in float16 with dtype="float16",
step = the case number. Every 100th case (0, 100, ...) holds one NaN in v, so it reports
nonfinite_input (an error); the others are healthy.
"""
import os
import sys

import h5py
import numpy as np


def main() -> int:
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    rng = np.random.default_rng(7)
    with h5py.File(out + ".tmp", "w") as f:
        for n in range(count):
            g = f.create_group(f"/many/case_{n:05d}")
            g.attrs["dtype"] = "float16"
            g.attrs["step"] = n
            for name in ("q", "k", "v", "do"):
                x = rng.standard_normal((1, 2, 8, 8)).astype(np.float16)
                if name == "v" and n % 100 == 0:
                    x[0, 1, 3, 5] = np.nan
                g.create_dataset(name, data=x)
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
