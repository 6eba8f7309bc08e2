"""A user module that binds flash_attn_func at import time, as models do (test_recorder_cuda_libs
imports it while the flash_attn stand-in is installed)."""
from flash_attn import flash_attn_func


def causal_attention(q, k, v):
    """((q, k, v), o) of a causal FlashAttention call on [B, S, H, D] tensors."""
    return (q, k, v), flash_attn_func(q, k, v, causal=True)
