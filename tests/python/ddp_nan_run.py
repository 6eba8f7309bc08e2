"""torchrun worker of test_recorder_distributed (2 ranks, gloo on CPU): a 2-layer DDP model over
SDPA, 3 steps recorded with when="nonfinite"; at step 1 rank 1's batch holds a NaN, rank 0's
is finite. No optimizer step, so the NaN gradients DDP averages never reach the weights and
steps 0 and 2 stay finite on both ranks.

usage: ddp_nan_run.py FOLDER, recording in turn (every Recorder made before init_process_group):
  FOLDER/local.h5 without sync;
  FOLDER/sync.h5 with sync=10 and context_parallel;
  FOLDER/skip.h5 with sync=SKIP_SYNC_SECONDS, where rank 0 runs step 1 without the recorder, so
    rank 1 waits for it in vain.
"""
import faulthandler
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

from attnscope_record import Recorder

SKIP_SYNC_SECONDS = 3.0
WATCHDOG_SECONDS = 80  # a worker still running then prints its stacks and exits (status 1)
SEQ = 16


class Block(torch.nn.Module):
    """x [B, S, 16] -> x + SDPA over 2 heads of 8."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = (t.unflatten(-1, (2, 8)).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + o.transpose(1, 2).flatten(2)


def batch(step, rank):
    torch.manual_seed(100 * step + rank)
    x = torch.randn(2, SEQ, 16)
    if step == 1 and rank == 1:
        x[1, 3, 5] = float("nan")
    return x


def train_step(model, step, rank):
    model.zero_grad(set_to_none=True)
    model(batch(step, rank)).square().mean().backward()


def record(model, rec, rank, skip_step=None):
    for step in range(3):
        if step == skip_step:
            train_step(model, step, rank)
            continue
        with rec.step(step):
            train_step(model, step, rank)
    rec.close()


def main(folder):
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    # declared only (the model is not sharded): 2-way load-balanced causal CP of SEQ tokens
    shard = {"rank": rank, "size": 2, "ranges": [[4 * rank, 4 * rank + 4],
                                                 [12 - 4 * rank, 16 - 4 * rank]]}
    # Which rank writes cases: without health statistics, a rank that writes none has no file.
    local = Recorder(os.path.join(folder, "local.h5"), when="nonfinite", stats=False)
    synced = Recorder(os.path.join(folder, "sync.h5"), when="nonfinite", sync=10,
                      context_parallel=shard, stats=False)
    skip = Recorder(os.path.join(folder, "skip.h5"), when="nonfinite", sync=SKIP_SYNC_SECONDS,
                    stats=False)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(Block(), Block()))
    record(model, local, rank)
    record(model, synced, rank)
    record(model, skip, rank, skip_step=1 if rank == 0 else None)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
