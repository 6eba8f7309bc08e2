"""Record every attention call of one training step of the pretrained all-MiniLM-L6-v2
(transformers' BertModel, 6 layers x 12 heads) into an attnscope dump, healthy or with a real
induced failure.

    python minilm_dump.py OUT.h5 [--mode healthy|overflow|padding] [--dtype fp32|bf16|fp16]

healthy:  forward + backward of a cosine-similarity loss on sentence pairs through
          attn_implementation="sdpa"; all 6 layers recorded with q, k, v, transformers'
          key-padding mask, o, dO, dQ, dK, dV.
overflow: fp16 model with hand-written eager attention (minilm_model.KEY_BIAS) whose layer-2
          q/k/v input is scaled by --factor (massive activations), keys padded with BERT's
          -10000 bias: q k^T passes 65504, turns inf, softmax NaN. Only calls whose output or
          gradients are non-finite are recorded.
padding:  fp16 model with eager attention and a query x key padding mask filled with -1e9 in
          fp32 (minilm_model.PAIR_FILL): cast to fp16 the fill becomes -inf, padded query rows
          are fully masked -> NaN.
Then: attnscope OUT.h5 (GUI) or attnscope-cli scan OUT.h5. Nothing is downloaded.
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # attnscope_record, uninstalled

from attnscope_record import Recorder  # noqa: E402
from minilm_model import KEY_BIAS, PAIR_FILL, MiniLM, similarity_loss  # noqa: E402

ANCHORS = ["A man is eating food.", "The girl is carrying a baby.",
           "A man is riding a white horse on an enclosed ground.",
           "Two men pushed carts through the woods."]
POSITIVES = ["A man is eating a piece of bread.", "A woman is holding her child.",
             "Someone rides a horse around a paddock.", "Two people push wagons in a forest."]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
OVERFLOW_LAYER = 2
ATTENTION = {"healthy": "sdpa", "overflow": KEY_BIAS, "padding": PAIR_FILL}


def build(mode, dtype, factor, device):
    model = MiniLM(DTYPES[dtype], ATTENTION[mode]).to(device)
    if mode == "overflow":
        model.scale_attention_input(OVERFLOW_LAYER, factor)
    return model


def run(out, mode="healthy", dtype="fp32", device="cpu", factor=100.0, budget_mb=256.0, step=0):
    """One training step of `mode`, recorded into `out`. Returns (recorder, model, loss)."""
    model = build(mode, dtype, factor, device)
    ids, valid = model.tokenize(ANCHORS + POSITIVES, device)
    when = None if mode == "healthy" else "nonfinite"
    rec = Recorder(out, steps=[step], when=when, budget_mb=budget_mb, model=model.bert)
    with rec.step(step):
        embeddings = model(ids, valid)
        n = len(ANCHORS)
        loss = similarity_loss(embeddings[:n], embeddings[n:])
        loss.backward()
    return rec, model, loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="HDF5 dump to write (overwritten)")
    parser.add_argument("--mode", choices=["healthy", "overflow", "padding"], default="healthy")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                        help="model precision (default fp32 healthy, fp16 for the failures)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--factor", type=float, default=100.0,
                        help="overflow mode: scale of layer 2's q/k/v input")
    parser.add_argument("--budget-mb", type=float, default=256.0)
    args = parser.parse_args()
    dtype = args.dtype or ("fp32" if args.mode == "healthy" else "fp16")
    rec, _, loss = run(args.out, args.mode, dtype, args.device, args.factor, args.budget_mb)
    print(f"{args.mode} {dtype}: loss {loss.item():.6g}, {len(rec.written)} cases written to "
          f"{rec.path}")
    for path in rec.written:
        print("  " + path)
    if rec.stopped:
        print("recording stopped: " + rec.stopped, file=sys.stderr)
        return 1
    print(f"open it: attnscope {rec.path}   (headless: attnscope-cli scan {rec.path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
