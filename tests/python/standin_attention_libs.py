"""Pure-torch stand-ins for the CUDA-only libraries the recorder hooks, xformers and flash_attn:
their real function signatures and mask classes, computed by math attention on CPU (scores in
float32, like the kernels), with real autograd gradients. `installed()` puts them into
sys.modules for a test and takes them out after. No dropout (p > 0 raises)."""
import contextlib
import sys
import types

import torch

XFORMERS_VERSION = "0.0.99+standin"
FLASH_ATTN_VERSION = "2.99.0+standin"


def attention(q, k, v, scale, bias=None, softcap=0.0):
    """(o, lse) of q [B, H, Sq, D], k, v [B, Hk, Sk, D] (k, v heads repeated to H); bias:
    additive, broadcast to [B, H, Sq, Sk], -inf masks."""
    repeat = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1)
    s = (q.float() @ k.float().transpose(-2, -1)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype), torch.logsumexp(s, -1)


def _no_dropout(p):
    if p:
        raise NotImplementedError("the stand-in has no dropout")


# --- flash_attn ----------------------------------------------------------------------------------
def _flash_bias(h, sq, sk, causal, window_size, alibi_slopes):
    """[1 | B, H, Sq, Sk] additive bias: FlashAttention's bottom-right causal and window as
    -inf, its ALiBi term (slope * j causal, -slope * |i + Sk - Sq - j| otherwise)."""
    i = torch.arange(sq)[:, None] + (sk - sq)
    j = torch.arange(sk)[None, :]
    left, right = window_size
    if causal:
        right = 0 if right < 0 else min(right, 0)
    banned = torch.zeros(sq, sk, dtype=torch.bool)
    if left >= 0:
        banned |= j < i - left
    if right >= 0:
        banned |= j > i + right
    bias = torch.zeros(1, h, sq, sk).masked_fill(banned, float("-inf"))
    if alibi_slopes is not None:
        slopes = alibi_slopes.float().reshape(-1, h)[:, :, None, None]
        bias = bias + (slopes * j if causal else -slopes * (i - j).abs())
    return bias


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False):
    _no_dropout(dropout_p)
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    bias = _flash_bias(q.shape[2], q.shape[1], k.shape[1], causal, window_size, alibi_slopes)
    o, lse = attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale, bias,
                       softcap)
    o = o.transpose(1, 2)
    return (o, lse, torch.empty(0)) if return_attn_probs else o


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    outs, lses = [], []
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(cq) - 1):
        qs, ks = slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])
        o, lse, _ = flash_attn_func(q[None, qs], k[None, ks], v[None, ks], dropout_p,
                                    softmax_scale, causal, window_size, softcap, alibi_slopes,
                                    deterministic, return_attn_probs=True)
        outs.append(o[0])
        lses.append(lse[0])
    o, lse = torch.cat(outs), torch.cat(lses, -1)  # [Tq, H, Dv], [H, Tq]
    return (o, lse, torch.empty(0)) if return_attn_probs else o


# --- xformers ------------------------------------------------------------------------------------
class AttentionBias:
    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        raise NotImplementedError


class LowerTriangularMask(AttentionBias):
    """Causal, top-left: query i attends keys j <= i."""

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        full = torch.full(shape, float("-inf"), dtype=torch.float32, device=device)
        return torch.triu(full, diagonal=1).to(dtype)


class LowerTriangularMaskWithTensorBias(LowerTriangularMask):
    def __init__(self, bias):
        self._bias = bias

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        return super().materialize(shape, dtype, device) + self._bias


class _SeqLenInfo:
    def __init__(self, seqlens):
        self.seqstart_py = [0]
        for n in seqlens:
            self.seqstart_py.append(self.seqstart_py[-1] + n)
        self.seqstart = torch.tensor(self.seqstart_py, dtype=torch.int32)
        self.max_seqlen = max(seqlens)


class BlockDiagonalMask(AttentionBias):
    """Packed sequences of a batch of 1: query block i attends key block i only."""

    def __init__(self, q_seqinfo, k_seqinfo):
        self.q_seqinfo, self.k_seqinfo = q_seqinfo, k_seqinfo

    @classmethod
    def from_seqlens(cls, q_seqlen, kv_seqlen=None):
        return cls(_SeqLenInfo(q_seqlen), _SeqLenInfo(kv_seqlen or q_seqlen))

    def _block(self, sq, sk):
        return torch.zeros(sq, sk)

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        out = torch.full(shape, float("-inf"), device=device)
        qs, ks = self.q_seqinfo.seqstart_py, self.k_seqinfo.seqstart_py
        for i in range(len(qs) - 1):
            out[..., qs[i]:qs[i + 1], ks[i]:ks[i + 1]] = self._block(qs[i + 1] - qs[i],
                                                                     ks[i + 1] - ks[i])
        return out.to(dtype)


class BlockDiagonalCausalMask(BlockDiagonalMask):
    """Each block causal, top-left."""

    def _block(self, sq, sk):
        return LowerTriangularMask().materialize((sq, sk))


def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *,
                               op=None, output_dtype=None):
    _no_dropout(p)
    scale = scale if scale is not None else query.shape[-1] ** -0.5
    if isinstance(attn_bias, AttentionBias):
        attn_bias = attn_bias.materialize((query.shape[0], query.shape[2], query.shape[1],
                                           key.shape[1]), device=query.device)
    o, _ = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), scale,
                     attn_bias)
    return o.transpose(1, 2)


def _module(name, **attributes):
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


@contextlib.contextmanager
def installed():
    """xformers(.ops, .ops.fmha, .ops.fmha.attn_bias) and flash_attn(.flash_attn_interface) in
    sys.modules, as the real packages lay them out."""
    classes = {c.__name__: c for c in (AttentionBias, LowerTriangularMask,
                                       LowerTriangularMaskWithTensorBias, BlockDiagonalMask,
                                       BlockDiagonalCausalMask)}
    modules = {
        "xformers": _module("xformers", __version__=XFORMERS_VERSION),
        "xformers.ops": _module("xformers.ops", **classes,
                                memory_efficient_attention=memory_efficient_attention),
        "xformers.ops.fmha": _module("xformers.ops.fmha",
                                     memory_efficient_attention=memory_efficient_attention),
        "xformers.ops.fmha.attn_bias": _module("xformers.ops.fmha.attn_bias", **classes),
        "flash_attn": _module("flash_attn", __version__=FLASH_ATTN_VERSION,
                              flash_attn_func=flash_attn_func,
                              flash_attn_varlen_func=flash_attn_varlen_func),
        "flash_attn.flash_attn_interface": _module(
            "flash_attn.flash_attn_interface", flash_attn_func=flash_attn_func,
            flash_attn_varlen_func=flash_attn_varlen_func),
    }
    sys.modules.update(modules)
    try:
        yield modules
    finally:
        for name in modules:
            del sys.modules[name]
