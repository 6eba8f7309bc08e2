// The text of a reproducer's repro.py (repro_script.h): the constants of the case, then one
// fixed body that loads tensors.safetensors, runs the recorded call and an fp64 reference.
#include "repro_script.h"

#include <cstdio>
#include <sstream>

namespace attnscope {
namespace {

// Plain PyTorch + safetensors: no attnscope import, runs anywhere torch does.
constexpr const char* kBody = R"PY(
import os
import sys
import traceback

try:
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
except ImportError as missing:  # exit 2: could not run (1 means reproduced)
    print(f"repro.py needs torch and safetensors: {missing}")
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
# Largest error of a correct kernel against fp64, relative to max |reference| (EXPECT mismatch).
TOLERANCE = {"float16": 5e-3, "bfloat16": 4e-2, "float32": 1e-4, "float64": 1e-10}
CUDA_BACKENDS = ("sdpa_efficient", "sdpa_cudnn", "flash_attn", "xformers")


def visible(t, shape):
    """bool [B, H, Sq, Sk]: the keys each query row attends (mask and causal structure)."""
    b, h, sq, sk = shape
    vis = torch.ones(shape, dtype=torch.bool)
    if "mask" in t:
        vis = vis & t["mask"].bool()
    if CAUSAL:
        shift = sk - sq if CAUSAL_ALIGN == "bottom_right" else 0
        vis = vis & torch.ones(sq, sk, dtype=torch.bool).tril(shift)
    return vis


def score_shape(t):
    q, k = t["q"], t["k"]
    return (q.shape[0], q.shape[1], q.shape[2], k.shape[2])


def eager(q, k, v, t, vis):
    """Attention as transformers' eager_attention_forward computes it, in the inputs' dtype."""
    group = q.shape[1] // k.shape[1]
    k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))
    s = torch.matmul(q, k.transpose(-2, -1)) * SCALE
    if SOFTCAP:
        s = torch.tanh(s / SOFTCAP) * SOFTCAP
    if "bias" in t:
        s = s + t["bias"].to(s.device, s.dtype)
    if "mask" in t or CAUSAL:
        s = s.masked_fill(~vis.to(s.device), float("-inf"))
    p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(p, v)


def sdpa_mask(t, vis, dtype, device):
    """attn_mask for F.scaled_dot_product_attention and whether is_causal does the job alone."""
    if "bias" not in t and "mask" not in t:
        if not CAUSAL:
            return None, False
        if CAUSAL_ALIGN == "top_left":
            return None, True
    if "bias" not in t:
        return vis.to(device), False
    bias = t["bias"].to(device, dtype)
    return bias.masked_fill(~vis.to(device), float("-inf")), False


def sdpa(q, k, v, t, vis, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    kernels = {"sdpa_math": SDPBackend.MATH, "sdpa_flash": SDPBackend.FLASH_ATTENTION,
               "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
               "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}
    mask, is_causal = sdpa_mask(t, vis, q.dtype, q.device)
    kwargs = dict(attn_mask=mask, is_causal=is_causal, scale=SCALE,
                  enable_gqa=q.shape[1] != k.shape[1])
    if backend in kernels:
        with sdpa_kernel(kernels[backend]):
            return F.scaled_dot_product_attention(q, k, v, **kwargs)
    return F.scaled_dot_product_attention(q, k, v, **kwargs)


def flash_attn(q, k, v, t, vis):
    from flash_attn import flash_attn_func
    o = flash_attn_func(*(x.transpose(1, 2) for x in (q, k, v)), softmax_scale=SCALE,
                        causal=CAUSAL, softcap=SOFTCAP)
    return o.transpose(1, 2)


def xformers(q, k, v, t, vis):
    import xformers.ops as xops
    bias, _ = sdpa_mask(t, vis, q.dtype, q.device)
    if bias is not None and bias.dtype == torch.bool:
        bias = torch.zeros(bias.shape, dtype=q.dtype, device=q.device).masked_fill(~bias, float("-inf"))
    group = q.shape[1] // k.shape[1]
    k, v = (x.repeat_interleave(group, dim=1) for x in (k, v))
    o = xops.memory_efficient_attention(*(x.transpose(1, 2) for x in (q, k, v)), attn_bias=bias,
                                        scale=SCALE)
    return o.transpose(1, 2)


def choose_call():
    """The call to run here, the device, and what was run in words."""
    cuda = torch.cuda.is_available()
    device = "cuda" if DEVICE.startswith("cuda") and cuda else "cpu"
    if CALL in ("flash_attn", "xformers") or BACKEND in CUDA_BACKENDS:
        if device == "cuda":
            return CALL, BACKEND, device, f"{CALL} ({BACKEND}) on {device}"
        fallback = "eager" if CALL == "eager" else "sdpa"
        return (fallback, "sdpa_math", "cpu",
                f"{fallback} (SDPA MATH) on cpu: the recorded {BACKEND or CALL} needs CUDA, so this "
                "runs the same semantics with another kernel; run it where the recorded kernel runs")
    what = "eager attention (transformers' eager math)" if CALL == "eager" else \
        f"{CALL} ({BACKEND or 'default backend'})"
    unwritten = "" if WRITTEN else \
        f" (the recorded {BACKEND} call is not written out: the same semantics)"
    if DEVICE.startswith("cuda") and not cuda:
        return CALL, BACKEND, "cpu", f"{what} on cpu: recorded on {DEVICE}, which this machine lacks"
    return CALL, BACKEND, device, f"{what} on {device}{unwritten}"


def run(t, call, backend, device):
    """o, dq, dk, dv of the call with the recorded dO, as float64 on the CPU."""
    q, k, v = (t[n].detach().to(device).requires_grad_() for n in ("q", "k", "v"))
    vis = visible(t, score_shape(t))
    if call == "eager":
        o = eager(q, k, v, t, vis)
    elif call == "flash_attn":
        o = flash_attn(q, k, v, t, vis)
    elif call == "xformers":
        o = xformers(q, k, v, t, vis)
    else:
        o = sdpa(q, k, v, t, vis, backend)
    o.backward(t["do"].to(device, o.dtype) if "do" in t else torch.ones_like(o))  # no dO: 1
    return {n: x.detach().double().cpu() for n, x in
            (("o", o), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad))}


def rows_of(x, b, h, r0, r1):
    """Rows r0..r1-1 of batch b, head h of a [B|1, H|1, Sq|1, Sk] score-shaped tensor."""
    x = x[min(b, x.shape[0] - 1), min(h, x.shape[1] - 1)]
    return x[r0:r1] if x.shape[0] > 1 else x.expand(r1 - r0, x.shape[1])


def visible_rows(t, b, h, r0, r1, sq, sk):
    """bool [r1 - r0, Sk]: the keys rows r0..r1-1 of (b, h) attend."""
    vis = torch.ones(r1 - r0, sk, dtype=torch.bool)
    if "mask" in t:
        vis = vis & rows_of(t["mask"].bool(), b, h, r0, r1)
    if CAUSAL:
        shift = sk - sq if CAUSAL_ALIGN == "bottom_right" else 0
        vis = vis & (torch.arange(sk)[None, :] <= torch.arange(r0, r1)[:, None] + shift)
    return vis


def reference(t):
    """fp64 attention of the same inputs: masked (row, key) pairs contribute nothing, not even
    a NaN or Inf stored there; rows that see no key give O = 0. Computed head by head in row
    blocks of at most 2^24 (row, key, feature) products, so memory stays bounded."""
    q, k, v = (t[n].detach().double().requires_grad_() for n in ("q", "k", "v"))
    b, h, sq, d = q.shape
    do = t["do"].double() if "do" in t else torch.ones(b, h, sq, v.shape[3], dtype=torch.float64)
    sk, dv = k.shape[2], v.shape[3]
    group = h // k.shape[1]
    o = torch.zeros(b, h, sq, dv, dtype=torch.float64)
    block = max(1, (1 << 24) // (sk * max(d, dv)))
    for bi in range(b):
        for hi in range(h):
            kh, vh = k[bi, hi // group], v[bi, hi // group]  # views: grads reach k, v
            for r0 in range(0, sq, block):
                r1 = min(sq, r0 + block)
                vis = visible_rows(t, bi, hi, r0, r1, sq, sk)
                pair = vis[..., None]
                s = (q[bi, hi, r0:r1, None, :] * torch.where(pair, kh[None], 0.0)).sum(-1)
                s = s * SCALE
                if SOFTCAP:
                    s = torch.tanh(s / SOFTCAP) * SOFTCAP
                if "bias" in t:
                    s = s + torch.where(vis, rows_of(t["bias"].double(), bi, hi, r0, r1), 0.0)
                seen = vis.any(-1, keepdim=True)
                s = torch.where(vis, s, float("-inf"))
                p = torch.softmax(torch.where(seen, s, 0.0), dim=-1) * seen
                ob = (p[..., None] * torch.where(pair, vh[None], 0.0)).sum(-2)
                ob.backward(do[bi, hi, r0:r1])
                o[bi, hi, r0:r1] = ob.detach()
    return {"o": o, "dq": q.grad, "dk": k.grad, "dv": v.grad}


def tiled_mapping_check(t):
    """max error (of max |o|) of the recorded o against fp64 attention in which query head h
    reads kv head h % Hk (k, v tiled, as x.repeat(1, n, 1, 1) makes them) instead of
    h // (H / Hk) (grouped, as repeat_interleave and SDPA's enable_gqa do); None when it
    cannot tell (no recorded o, no GQA or one kv group)."""
    recorded = t.get("recorded_o")
    h, hk = t["q"].shape[1], t["k"].shape[1]
    if recorded is None or h == hk or hk < 2:
        return None
    q, k, v = (t[n].double() for n in ("q", "k", "v"))
    k, v = (x.repeat(1, h // hk, 1, 1) for x in (k, v))
    s = q @ k.transpose(-2, -1) * SCALE
    if SOFTCAP:
        s = torch.tanh(s / SOFTCAP) * SOFTCAP
    if "bias" in t:
        s = s + t["bias"].double()
    s = s.masked_fill(~visible(t, score_shape(t)), float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    ok = torch.isfinite(o) & torch.isfinite(recorded.double())
    scale = float(o[ok].abs().max()) if ok.any() else 0.0
    return float((o - recorded.double())[ok].abs().max()) / scale if scale > 0 else None


def main():
    t = load_file(os.path.join(HERE, "tensors.safetensors"))
    print(f"finding: {FINDING}: {FINDING_TEXT}")
    print(f"torch {torch.__version__}; recorded with torch {RECORDED_TORCH or 'unknown'} on "
          f"{DEVICE or 'unknown device'}, backend {BACKEND or 'not recorded'}, {DTYPE}")
    call, backend, device, ran = choose_call()
    print(f"runs: {ran}; shapes q {tuple(t['q'].shape)} k {tuple(t['k'].shape)}")
    got, ref = run(t, call, backend, device), reference(t)
    inputs_bad = [n for n in ("q", "k", "v", "do") if n in t and not torch.isfinite(t[n]).all()]
    reproduced = False
    recorded_off = []  # recorded outputs beyond the tolerance (EXPECT mismatch)
    for name in ("o", "dq", "dk", "dv"):
        x, r = got[name], ref[name]
        bad = ~torch.isfinite(x)
        leak = int((bad & torch.isfinite(r)).sum())
        both = torch.isfinite(x) & torch.isfinite(r)
        scale = float(r[both].abs().max()) if both.any() else 0.0
        err = float((x - r)[both].abs().max()) / scale if both.any() and scale > 0 else 0.0
        line = f"  {name}: {int(bad.sum())} non-finite ({leak} where fp64 is finite)"
        if both.any():
            line += f", max error {err:.3g} of max |fp64|"
        recorded = t.get("recorded_" + name)
        if recorded is not None:
            rr = recorded.double()
            ok = torch.isfinite(rr) & torch.isfinite(r)
            rerr = float((rr - r)[ok].abs().max()) / scale if ok.any() and scale > 0 else 0.0
            line += f"; recorded {name}: {int((~torch.isfinite(rr)).sum())} non-finite, " \
                    f"max error {rerr:.3g} of max |fp64|"
            if EXPECT == "mismatch" and rerr > TOLERANCE[DTYPE]:
                recorded_off.append(name)
        print(line)
        if EXPECT == "nonfinite" and leak > 0:
            reproduced = True
        if EXPECT == "carried" and inputs_bad and int(bad.sum()) > 0:
            reproduced = True
        if EXPECT == "mismatch" and err > TOLERANCE[DTYPE]:
            reproduced = True
    if inputs_bad:
        print(f"  non-finite inputs: {', '.join(inputs_bad)}")
    if reproduced:
        print(f"REPRODUCED: {FINDING} with {ran}")
        return 1
    print(f"not reproduced with {ran}")
    tiled = tiled_mapping_check(t) if "o" in recorded_off else None
    if tiled is not None and tiled <= TOLERANCE[DTYPE]:
        print(f"the recorded o matches query head h reading kv head h % Hk (error {tiled:.3g}): "
              "a GQA head-mapping mismatch (k / v tiled with repeat instead of grouped with "
              "repeat_interleave / enable_gqa)")
    if recorded_off:
        print(f"the recorded {', '.join(recorded_off)} differ from fp64 beyond {TOLERANCE[DTYPE]:g} "
              "while this call agrees: what ran in the recorded step was not this call as "
              "torch computes it here (another kernel build or device, or code around the call)")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # exit 2: could not run (1 means reproduced)
        traceback.print_exc()
        status = 2
    sys.exit(status)
)PY";

// A Python string literal of `text`: double-quoted, backslashes and quotes escaped, control
// characters as \xNN. Text from the dump (its path, attributes, finding messages) only ever
// reaches repro.py this way, so no file name or attribute can become code there.
std::string py_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string py_float(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace

const char* repro_expectation(FindingKind kind) {
  switch (kind) {
    case FindingKind::nonfinite_input:
      return "carried";
    case FindingKind::recorded_mismatch:
    case FindingKind::recorded_convention:
    case FindingKind::precision_loss:
    case FindingKind::silent_zero_row:
    case FindingKind::gradient_explosion:
      return "mismatch";
    default:
      return "nonfinite";
  }
}

std::string repro_script(const ReproCall& c) {
  std::ostringstream s;
  s << "#!/usr/bin/env python3\n"
    << "\"\"\"Minimal reproducer of an attention failure (written by attnscope-cli repro; SOURCE\n"
    << "names the case it was shrunk from, FINDING what breaks).\n\n"
    << "Runs the recorded attention call on tensors.safetensors (next to this file) with the\n"
    << "recorded dO, compares o and the gradients with an fp64 reference and prints what breaks.\n"
    << "Needs torch and safetensors only. Exit status 1 when the failure reproduces, 0 when not,\n"
    << "2 when it could not run.\n"
    << "\"\"\"\n"
    << "# The recorded call (tensors are [B, H, S, D]; k / v may have fewer heads: GQA).\n"
    << "CALL = " << py_string(c.call) << "  # eager | sdpa | flash_attn | xformers\n"
    << "BACKEND = " << py_string(c.backend) << "  # as recorded; \"\" when not recorded\n"
    << "WRITTEN = " << (c.written ? "True" : "False")
    << "  # False: CALL runs the semantics of a call not written out\n"
    << "DEVICE = " << py_string(c.device) << "\n"
    << "DTYPE = " << py_string(c.dtype) << "\n"
    << "SCALE = " << py_float(c.scale) << "\n"
    << "CAUSAL = " << (c.causal ? "True" : "False") << "\n"
    << "CAUSAL_ALIGN = " << py_string(c.causal_align) << "\n"
    << "SOFTCAP = " << py_float(c.softcap) << "\n"
    << "RECORDED_TORCH = " << py_string(c.recorded_torch) << "\n"
    << "SOURCE = " << py_string(c.source) << "\n"
    << "FINDING = " << py_string(c.finding) << "\n"
    << "FINDING_TEXT = " << py_string(c.finding_text) << "\n"
    << "# nonfinite: NaN / Inf where fp64 is finite; carried: non-finite inputs reach the\n"
    << "# outputs; mismatch: an error beyond TOLERANCE of max |fp64|.\n"
    << "EXPECT = " << py_string(c.expect) << "\n"
    << kBody;
  return s.str();
}

}  // namespace attnscope
