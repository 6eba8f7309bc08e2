"""Writes a run folder as attnscope_record does under torch.distributed: one dump per rank,
FOLDER/rank_RRRRR.h5, with the recorder's root attributes and /step_SSSSSS/layer_LL cases of
q, k, v, do [1, 2, 16, 8] float16; NaNs in q (head 1, row 3) where asked. Used by the CLI's
run-folder tests and the Slurm test.

usage: python tests/data/run_folder.py FOLDER [--ranks 3] [--steps 3] [--nan RANK:STEP:LAYER]...
"""
import argparse
import os
import shutil

import h5py
import numpy as np


def write_rank(path, rank, world, steps=3, layers=2, nan_at=(), host="node7"):
    """One rank's dump; a NaN in q of each (step, layer) in nan_at."""
    rng = np.random.default_rng(100 + rank)
    with h5py.File(path, "w") as f:
        f.attrs.update(attnscope_schema=1, attnscope_schema_minor=1, rank=rank, world_size=world,
                       local_rank=rank % 8, host=host, pid=1000 + rank, process_group="gloo")
        for step in range(steps):
            for layer in range(layers):
                g = f.create_group(f"/step_{step:06d}/layer_{layer:02d}")
                g.attrs.update(step=step, layer=layer, dtype="float16")
                for name in ("q", "k", "v", "do"):
                    x = rng.standard_normal((1, 2, 16, 8)).astype(np.float16)
                    if name == "q" and (step, layer) in nan_at:
                        x[0, 1, 3, 2] = np.nan
                    g.create_dataset(name, data=x)


def write_run(folder, nan_by_rank, world=2, steps=None):
    """A fresh run folder: rank r gets NaNs at nan_by_rank[r] and steps[r] steps (default 3)."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for rank in range(world):
        write_rank(os.path.join(folder, f"rank_{rank:05d}.h5"), rank, world,
                   steps=(steps or {}).get(rank, 3), nan_at=nan_by_rank.get(rank, ()))
    return folder


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--nan", action="append", default=[], metavar="RANK:STEP:LAYER")
    a = ap.parse_args()
    nan_by_rank = {}
    for text in a.nan:
        rank, step, layer = map(int, text.split(":"))
        nan_by_rank.setdefault(rank, []).append((step, layer))
    write_run(a.folder, nan_by_rank, a.ranks, {r: a.steps for r in range(a.ranks)})


if __name__ == "__main__":
    main()
