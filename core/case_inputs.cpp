// Conversion of canonical case tensors into kernel inputs, with broadcast strides for the
// mask, the bias and the dropout keep-mask, under the recorded run's semantics.
#include "core/case_inputs.h"

#include <cmath>

#include "core/replay.h"

namespace attnscope {
namespace {

// Strides of a rank-4 canonical tensor broadcast to [B, H, Sq, Sk] (0 on size-1 dims).
std::optional<BroadcastStrides> broadcast_strides(const std::vector<int64_t>& shape,
                                                  const int64_t (&full)[4]) {
  if (shape.size() != 4) return std::nullopt;
  int64_t stride[4];
  int64_t running = 1;
  for (int d = 3; d >= 0; --d) {
    if (shape[d] != 1 && shape[d] != full[d]) return std::nullopt;
    stride[d] = shape[d] == 1 ? 0 : running;
    running *= shape[d];
  }
  return BroadcastStrides{stride[0], stride[1], stride[2], stride[3]};
}

// q, k, v, dO of `data` in fp64 (InputValues::fp64).
void read_input_values(const CaseData& data, CaseInputs& in) {
  in.q = data.q().to_double();
  in.k = data.k().to_double();
  in.v = data.v().to_double();
  if (const HostTensor* dout = data.find("do")) in.dout = dout->to_double();
}

}  // namespace

std::optional<Precision> precision_from_dtype(const std::string& dtype) {
  if (dtype == "float16" || dtype == "half" || dtype == "fp16") return Precision::f16;
  if (dtype == "bfloat16" || dtype == "bf16") return Precision::bf16;
  if (dtype == "float32" || dtype == "float" || dtype == "fp32") return Precision::f32;
  if (dtype == "float64" || dtype == "double" || dtype == "fp64") return Precision::f64;
  return std::nullopt;
}

KernelInputs::KernelInputs(const CaseData& data)
    : q(data.q().to_float()), k(data.k().to_float()), v(data.v().to_float()) {
  if (const HostTensor* d = data.find("do")) dout = d->to_float();
}

Result<double> resolve_scale(const CaseData& data, const RunChoice& settings) {
  const double scale =
      settings.scale ? *settings.scale : data.info.config.effective_scale(data.info.dims.head_dim);
  if (!std::isfinite(scale) || scale <= 0) {
    return make_error(ErrorCode::invalid_argument,
                      data.info.path + ": softmax scale " + std::to_string(scale) +
                          " is not a positive finite number",
                      "set a scale > 0 (default 1/sqrt(D))");
  }
  return scale;
}

Result<CaseInputs> make_case_inputs(const CaseData& data, const RunChoice& settings,
                                    InputValues values) {
  const CaseDims& d = data.info.dims;
  const CaseConfig& cfg = data.info.config;
  const std::string where = data.info.path;
  CaseInputs in;
  AttnParams& p = in.params;
  p.batch = d.batch;
  p.heads = d.heads;
  p.kv_heads = d.kv_heads;
  p.seqlen_q = d.seqlen_q;
  p.seqlen_k = d.seqlen_k;
  p.head_dim = d.head_dim;
  p.head_dim_v = d.head_dim_v;
  Result<double> scale = resolve_scale(data, settings);
  if (!scale) return scale.error();
  p.scale = *scale;
  p.softcap = cfg.softcap;
  p.causal = cfg.causal;
  p.causal_align = cfg.causal_align;
  const Replay replay = replay_of(data.info.config, data.find("dropout_mask") != nullptr);
  p.mask_fill = settings.mask_fill.value_or(replay.mask_fill);
  p.precision = settings.precision.value_or(replay.precision);
  p.backward_p = replay.backward_p;

  in.has_dout = data.find("do") != nullptr;
  if (values == InputValues::fp64) read_input_values(data, in);
  const int64_t full[4] = {d.batch, d.heads, d.seqlen_q, d.seqlen_k};
  if (const HostTensor* mask = data.find("mask")) {
    const auto strides = broadcast_strides(mask->shape, full);
    if (!strides) {
      return make_error(ErrorCode::format,
                        where + "/mask: shape " + mask->shape_string() +
                            " is not broadcastable to [B, H, Sq, Sk]",
                        "store the mask as [B|1, H|1, Sq|1, Sk]");
    }
    in.mask = mask->to_mask();
    if (replay.invert_mask) {
      for (uint8_t& m : in.mask) m = m ? 0 : 1;
    }
    p.mask = in.mask.data();
    p.mask_strides = *strides;
  }
  // A keep-mask only means something with the dropout probability that scaled it.
  const HostTensor* keep = cfg.run.dropout_p > 0 ? data.find("dropout_mask") : nullptr;
  if (keep != nullptr) {
    const auto strides = broadcast_strides(keep->shape, full);
    if (!strides) {
      return make_error(ErrorCode::format,
                        where + "/dropout_mask: shape " + keep->shape_string() +
                            " is not broadcastable to [B, H, Sq, Sk]",
                        "store the keep-mask as [B, H, Sq, Sk] bool");
    }
    in.dropout_keep = keep->to_mask();
    p.dropout_keep = in.dropout_keep.data();
    p.dropout_strides = *strides;
    p.dropout_p = cfg.run.dropout_p;
  }
  if (const HostTensor* bias = data.find("bias")) {
    const auto strides = broadcast_strides(bias->shape, full);
    if (!strides) {
      return make_error(ErrorCode::format,
                        where + "/bias: shape " + bias->shape_string() +
                            " is not broadcastable to [B, H, Sq, Sk]",
                        "store the bias as [B|1, H|1, Sq|1, Sk|1]");
    }
    in.bias = bias->to_double();
    p.bias = in.bias.data();
    p.bias_strides = *strides;
  }
  return in;
}

}  // namespace attnscope
