"""Attention health statistics of one finished call, per query head (issue 45): what the
`health` command fits over a run's steps to warn before attention goes non-finite.

Computed on the call's device without autograd, in fp32 (fp64 for fp64 calls), from the tensors
the call already holds. Logit statistics are exact over the sampled query rows: in each of the
B sequences (batch elements; a packed call is one) R = max(MIN_ROWS, SAMPLE_ROWS // B) evenly
spaced rows, the first and last included, or all Sq rows when Sq <= R (`rows` says R);
`logit_bound` bounds every row: |scale| * max_i |q_i| * max_j |k_j| (Cauchy-Schwarz).

Per head h (GQA: kv head h // (H / Hkv)):
  max_abs_logit  max |scale * q.k| over the sampled rows and every key of the row's sequence,
                 masked keys included (an eager / unfused kernel computes them too)
  logit_bound    the bound above, over all rows
  min_lse, max_lse, mean_entropy, min_entropy (nats), dominant_share (rows with max P > 0.99):
                 of the softmax the call computes (causal, mask, bias, softcap, packed
                 sequences), over sampled rows that see at least two keys (NaN when none)
  max_abs_o      max |o| of the head
  norm_do, norm_dq, norm_dk, norm_dv   Frobenius norms of the head's gradients (dk, dv: of its
                 kv head); NaN when the gradient was not caught
  nonfinite      NaN / Inf elements of o, do, dq of the head and dk, dv of its kv head
"""
import math

import numpy as np
import torch

SAMPLE_ROWS = 128
MIN_ROWS = 8
COLUMNS = ("head", "max_abs_logit", "logit_bound", "min_lse", "max_lse", "mean_entropy",
           "min_entropy", "dominant_share", "max_abs_o", "norm_do", "norm_dq", "norm_dk",
           "norm_dv", "nonfinite")
DOMINANT_P = 0.99
# A key biased by this or less counts as masked (transformers' masks add finfo.min).
MASKED_BIAS = -1e30
# Call attributes kept beside the rows (the health command reads the run's semantics off them).
CALL_ATTRS = ("step", "micro_batch", "layer", "name", "function", "backend", "dtype",
              "autocast_dtype", "device", "scale", "causal", "softcap")


def _bhsd(call, name):
    """Tensor `name` of the call as [B, H, S, D] (packed calls: [1, H, T, D]), or None."""
    if name not in call.tensors:
        return None
    t = call.stored(name)
    layout = call.attrs.get("layout", "BHSD")
    if layout == "BSHD":
        return t.transpose(1, 2)
    if layout == "THD":
        return t.transpose(0, 1).unsqueeze(0)
    return _as_4d(t)


def _segments(starts, n, device):
    """Sequence index of each of n packed tokens from [N+1] starts."""
    return torch.bucketize(torch.arange(n, device=device), starts[1:].to(device), right=True)


def _per_head(x, heads, reduce):
    """reduce(x, dims) over all but the head dim of [B, Hx, S, D] x, per head, repeated to
    `heads` when x has kv heads (float64, on the host); NaN when x is None."""
    if x is None:
        return torch.full((heads,), float("nan"), dtype=torch.float64)
    values = reduce(x, (0, 2, 3)).double().cpu()
    return values.repeat_interleave(heads // x.shape[1])


def _norm(x, dims):
    return torch.linalg.vector_norm(x, dim=dims, dtype=_work(x))


def _max_abs(x, dims):
    return x.abs().amax(dim=dims)


def _work(x):
    """Precision of the statistics: float64 for float64 tensors, else float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _nonfinite(x, dims):
    return (~torch.isfinite(x)).sum(dim=dims)


def _allowed(call, rows, sq, sk, device):
    """[B|1, H|1, R, Sk] bool of the keys each sampled row attends to, or None (all)."""
    attrs = call.attrs
    allowed = None

    def meet(m):
        nonlocal allowed
        allowed = m if allowed is None else allowed & m

    keys = torch.arange(sk, device=device)
    if attrs.get("causal"):
        shift = sk - sq if attrs.get("causal_align") == "bottom_right" else 0
        meet((keys[None, :] <= rows[:, None] + shift)[None, None])
    if "mask" in call.tensors:
        mask = _as_4d(call.stored("mask"))
        meet((mask[..., rows, :] if mask.shape[-2] > 1 else mask).bool())
    if attrs.get("layout") == "THD":
        seq_q = _segments(call.tensors["cu_seqlens_q"], sq, device)[rows]
        seq_k = _segments(call.tensors["cu_seqlens_k"], sk, device)
        meet((seq_q[:, None] == seq_k[None, :])[None, None])
    return allowed


def _as_4d(t):
    """t with leading dims of 1 up to 4 dims (BHSD tensors given as [H, S, D] or [S, D])."""
    while t.dim() < 4:
        t = t.unsqueeze(0)
    return t


def _row_stats(call, q, k, rows, scale):
    """Per head: max |logit|, min / max LSE, mean / min entropy, dominant share over `rows`."""
    work = _work(q)
    b, h, sq, _ = q.shape
    hk, sk = k.shape[1], k.shape[2]
    group = h // hk
    qs = q[:, :, rows].to(work)
    s = torch.einsum("bkgrd,bkjd->bkgrj", qs.reshape(b, hk, group, len(rows), -1),
                     k.to(work)).reshape(b, h, len(rows), sk) * scale
    allowed = _allowed(call, rows, sq, sk, q.device)
    if call.attrs.get("layout") == "THD":  # logits across packed sequences are never computed
        seen = s.masked_fill(~allowed, 0.0)
        max_abs = torch.maximum(seen.amax(dim=(0, 2, 3)), -seen.amin(dim=(0, 2, 3)))
    else:
        max_abs = torch.maximum(s.amax(dim=(0, 2, 3)), -s.amin(dim=(0, 2, 3)))
    cap = call.attrs.get("softcap")
    if cap:
        s = cap * torch.tanh(s / cap)
    if "bias" in call.tensors:
        bias = _as_4d(call.stored("bias"))
        s += (bias[..., rows, :] if bias.shape[-2] > 1 else bias).to(work)
    if allowed is not None:
        s.masked_fill_(~allowed, float("-inf"))
    # Rows that see at least two keys (a masked key: excluded, or biased by -1e30 or less);
    # a row that sees one key has P = 1 there whatever its logits.
    if "bias" in call.tensors:
        counted = (s > MASKED_BIAS).sum(dim=-1) >= 2
    elif allowed is not None:
        counted = (allowed.sum(dim=-1) >= 2).expand(b, h, len(rows))
    else:
        counted = torch.full((b, h, len(rows)), sk >= 2, device=s.device)
    lse = torch.logsumexp(s, dim=-1)  # [B, H, R]
    top = s.amax(dim=-1)
    s -= lse.masked_fill(~counted, 0.0)[..., None]  # log P
    entropy = -(s.exp() * s).nansum(dim=-1)
    dominant = ((top - lse).exp() > DOMINANT_P).to(work)
    n = counted.sum(dim=(0, 2))
    inf = torch.tensor(float("inf"), dtype=work, device=s.device)
    picked = [lse.where(counted, inf).amin(dim=(0, 2)), lse.where(counted, -inf).amax(dim=(0, 2)),
              entropy.where(counted, 0.0).sum(dim=(0, 2)) / n.clamp(min=1),
              entropy.where(counted, inf).amin(dim=(0, 2)),
              dominant.where(counted, 0.0).sum(dim=(0, 2)) / n.clamp(min=1)]
    return [max_abs.double().cpu()] + [x.masked_fill(n == 0, float("nan")).double().cpu()
                                       for x in picked]


def call_stats(call):
    """(call attributes: CALL_ATTRS present plus heads, kv_heads, seqlen_q, seqlen_k, rows;
    float32 [H, len(COLUMNS)] rows) of one finished call."""
    with torch.no_grad():
        q, k = _bhsd(call, "q"), _bhsd(call, "k")
        heads, sq, sk = q.shape[1], q.shape[2], k.shape[2]
        scale = float(call.attrs.get("scale", 1.0 / math.sqrt(q.shape[-1])))
        per_sequence = max(MIN_ROWS, SAMPLE_ROWS // q.shape[0])
        if sq <= per_sequence:
            rows = torch.arange(sq, device=q.device)
        else:
            rows = torch.linspace(0, sq - 1, per_sequence, device=q.device).round().long()
        logits = _row_stats(call, q, k, rows, scale)
        def row_norm(x, dims):
            return torch.linalg.vector_norm(x, dim=-1, dtype=_work(x)).amax(dim=(0, 2))

        columns = [torch.arange(heads, dtype=torch.float64), logits[0],
                   abs(scale) * _per_head(q, heads, row_norm) * _per_head(k, heads, row_norm),
                   *logits[1:]]
        bad = torch.zeros(heads, dtype=torch.float64)
        for name, reduce in (("o", _max_abs), ("do", _norm), ("dq", _norm), ("dk", _norm),
                             ("dv", _norm)):
            x = _bhsd(call, name)
            columns.append(_per_head(x, heads, reduce))
            if x is not None and not bool(torch.isfinite(columns[-1]).all()):
                bad += _per_head(x, heads, _nonfinite)  # counted only where a NaN / Inf shows
        columns.append(bad)
    table = torch.stack(columns, dim=1).numpy().astype(np.float32)
    attrs = {key: call.attrs[key] for key in CALL_ATTRS if key in call.attrs}
    attrs.update(heads=heads, kv_heads=k.shape[1], seqlen_q=sq, seqlen_k=sk, rows=len(rows))
    return attrs, table
