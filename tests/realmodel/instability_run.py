"""A real attention instability on CPU (issue 45): transformers' LlamaForCausalLM, randomly
initialised (2 layers, 4 heads of 16, eager attention), trained on a copy task under CPU fp16
autocast with AdamW at learning rate 0.05. The attention logits grow (roughly quadratically:
the q and k weights grow by about the rate per step) until a head's Q K^T passes fp16's
65504 in the eager kernel and the step goes non-finite: on this seed around step 370 on an
Intel Xeon and 540 on an AMD EPYC (torch's CPU kernels round differently, and the trajectory
follows), so the run allows up to MAX_STEPS. The control trains the same model at rate 0.01
and stays finite.

The whole run is recorded with attnscope_record (when="nonfinite": the statistics of every
step, the tensors of the step that goes non-finite). Deterministic: fixed seeds, one thread.

usage: python instability_run.py OUT.h5 [--rate 0.05] [--steps 1000]
"""
import argparse
import math
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import attnscope_record

UNSTABLE_RATE, CONTROL_RATE = 0.05, 0.01
MAX_STEPS = 1000  # the unstable run goes non-finite well before on every CPU tried


def train(path, rate, steps):
    """Trains until `steps` or the first non-finite loss, recorded into `path`; returns (that
    step or None, seconds per step)."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=128, attn_implementation="eager")
    model = LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=rate, weight_decay=0.0)
    data = torch.Generator().manual_seed(1)
    recorder = attnscope_record.Recorder(path, when="nonfinite", model=model)
    failed = None
    start = time.perf_counter()
    for step in range(steps):
        prefix = torch.randint(0, 64, (8, 16), generator=data)
        ids = torch.cat([prefix] * 4, dim=1)  # the copy task: attend to the previous repeat
        with recorder.step(step):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(input_ids=ids, labels=ids).loss
            optimizer.zero_grad()
            loss.backward()
        optimizer.step()
        if not math.isfinite(loss.item()):
            failed = step
            break
    seconds = (time.perf_counter() - start) / (step + 1)
    recorder.close()
    return failed, seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rate", type=float, default=UNSTABLE_RATE)
    parser.add_argument("--steps", type=int, default=MAX_STEPS)
    args = parser.parse_args()
    failed, seconds = train(args.out, args.rate, args.steps)
    print(f"first non-finite step: {failed}; {seconds * 1000:.1f} ms per step", file=sys.stderr)


if __name__ == "__main__":
    main()
