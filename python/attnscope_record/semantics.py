"""Run semantics of one attention call, decided when the call is made: which kernel ran
(`backend`), in which precision (`dtype`, `autocast_dtype`). These are the schema-1.1
attributes replay relies on (`mask_convention` follows the datasets: capture.py).
"""
import torch

# torch.nn.attention.SDPBackend values returned by aten::_fused_sdp_choice -> attribute names.
SDPA_BACKENDS = {0: "sdpa_math", 1: "sdpa_flash", 2: "sdpa_efficient", 3: "sdpa_cudnn",
                 4: "sdpa_overrideable"}
UNKNOWN_BACKEND = "sdpa_unknown"
CUSTOM_BACKEND = "custom"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def autocast_dtype(t: torch.Tensor):
    """The dtype autocast casts `t` to before SDPA, or None. Autocast casts every floating
    tensor of its device type except float64 (at::autocast::cached_cast), so fp16 inputs run
    in bf16 under a bf16 autocast too."""
    device_type = t.device.type
    try:
        if not torch.is_autocast_enabled(device_type):
            return None
        target = torch.get_autocast_dtype(device_type)
    except RuntimeError:  # a device type autocast does not know
        return None
    if not t.is_floating_point() or t.dtype == torch.float64:
        return None
    return target


def as_kernel_sees(t, target):
    """Stand-in for autocast's cast of `t` to `target` for the backend choice: same shape,
    strides (the cast keeps those of a dense tensor), device and requires_grad; no data."""
    if t is None or target is None or not t.is_floating_point() or t.dtype == torch.float64:
        return t
    return torch.empty_like(t, dtype=target).requires_grad_(
        t.requires_grad and torch.is_grad_enabled())


def sdpa_backend(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> str:
    """Name of the SDPA kernel the dispatcher picks for these arguments: the same choice
    function SDPA calls, so torch.nn.attention.sdpa_kernel contexts and the backends' own
    constraints (CPU flash refuses dropout, ...) are respected."""
    target = autocast_dtype(q)
    q, k, v, attn_mask = (as_kernel_sees(t, target) for t in (q, k, v, attn_mask))
    try:
        choice = torch._fused_sdp_choice(q, k, v, attn_mask, float(dropout_p), bool(is_causal),
                                         scale=scale, enable_gqa=bool(enable_gqa))
    except (RuntimeError, TypeError, ValueError):
        return UNKNOWN_BACKEND
    return SDPA_BACKENDS.get(int(choice), UNKNOWN_BACKEND)


def call_attributes(q, backend: str, follows_autocast: bool = True) -> dict:
    """torch_version, backend, dtype (precision the kernel ran in) and autocast_dtype (only
    under autocast, for kernels autocast casts the inputs of: SDPA, flex; xformers and
    flash_attn run in q's dtype)."""
    target = autocast_dtype(q) if follows_autocast else None
    attrs = {"torch_version": str(torch.__version__), "backend": backend,
             "dtype": dtype_name(target or q.dtype)}
    if target is not None:
        attrs["autocast_dtype"] = dtype_name(target)
    return attrs
