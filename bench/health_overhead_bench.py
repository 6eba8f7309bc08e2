"""Recorder overhead of the health statistics (issue 45, item 1): training steps of
transformers' BertModel with the all-MiniLM-L6-v2 weights (6 layers x 12 heads, SDPA, fp32,
AdamW), BATCH sequences of SEQLEN tokens, timed without a Recorder, with
Recorder(when="nonfinite", stats=False) and with Recorder(when="nonfinite") (statistics on),
alternating per step so that drift hits all three alike. Prints one JSON document: median
seconds per step of each, the statistics' overhead over the recorder without them and over the
bare step, and the bytes of /health per call per step.

usage: PYTHONPATH=python:python/examples python bench/health_overhead_bench.py
         [--steps 20] [--batch 16] [--seqlen 128] [--threads 2]
"""
import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time

import h5py
import torch

import attnscope_record
from minilm_model import MiniLM


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seqlen", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = MiniLM()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(1000, 20000, (args.batch, args.seqlen))
    valid = torch.ones_like(ids, dtype=torch.bool)

    def step():
        emb = model(ids, valid)
        loss = emb.square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    with tempfile.TemporaryDirectory() as folder:
        recorders = {
            "bare": None,
            "recorder": attnscope_record.Recorder(os.path.join(folder, "plain.h5"),
                                                  when="nonfinite", stats=False),
            "recorder_stats": attnscope_record.Recorder(os.path.join(folder, "stats.h5"),
                                                        when="nonfinite", model=model.bert),
        }
        times = {name: [] for name in recorders}
        step()  # warm-up
        for n in range(args.steps):
            for name, rec in recorders.items():
                context = rec.step(n) if rec is not None else contextlib.nullcontext()
                start = time.perf_counter()
                with context:
                    step()
                times[name].append(time.perf_counter() - start)
        for rec in recorders.values():
            if rec is not None:
                rec.close()
        with h5py.File(os.path.join(folder, "stats.h5"), "r") as f:
            blocks = f["health"].values()
            health_bytes = sum(d.id.get_storage_size() + len(d.attrs["calls"]) for d in blocks)
    median = {name: statistics.median(t) for name, t in times.items()}
    calls = 6 * args.steps
    print(json.dumps({
        "model": "all-MiniLM-L6-v2 BertModel, sdpa, fp32, AdamW",
        "batch": args.batch, "seqlen": args.seqlen, "threads": args.threads,
        "steps": args.steps, "seconds_per_step": median,
        "stats_over_recorder": median["recorder_stats"] / median["recorder"] - 1.0,
        "stats_over_bare": median["recorder_stats"] / median["bare"] - 1.0,
        "recorder_over_bare": median["recorder"] / median["bare"] - 1.0,
        "health_bytes_per_call_step": health_bytes / calls,
        "target": {"overhead": 0.05, "bytes_per_call_step": 2048},
    }, indent=1))


if __name__ == "__main__":
    main()
