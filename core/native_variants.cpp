// Registry runs of the native kernels: the naive fp64 reference and the CPU fused / unfused
// kernels with precision emulation, plus the fused kernel upcast to fp32 (SDPA MATH on CPU).
#include <memory>
#include <vector>

#include "core/variant_runs.h"
#include "kernels/precision.h"
#include "kernels/reference/reference_attention.h"

namespace attnscope {
namespace {

std::vector<float> to_float(const double* x, int64_t n) {
  return std::vector<float>(x, x + n);
}

std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

class ReferenceRun final : public VariantRun {
 public:
  // params.precision is kept: it only picks the finfo.min fill value, which should be that of
  // the precision the case is studied in.
  ReferenceRun(const AttnParams& params, const VariantInputs& in) : params_(params) {
    const int64_t B = params.batch, H = params.heads, Hk = params.kv_heads;
    const int64_t Sq = params.seqlen_q, Sk = params.seqlen_k;
    q_.assign(in.q, in.q + B * H * Sq * params.head_dim);
    k_.assign(in.k, in.k + B * Hk * Sk * params.head_dim);
    v_.assign(in.v, in.v + B * Hk * Sk * params.head_dim_v);
    if (in.dout != nullptr) dout_.assign(in.dout, in.dout + B * H * Sq * params.head_dim_v);
  }

  void forward() override {
    trace_ = reference_attention(params_, q_.data(), k_.data(), v_.data(),
                                 dout_.empty() ? nullptr : dout_.data());
  }
  void backward() override {}

  VariantOutputs outputs() const override {
    return {trace_.o, trace_.lse, trace_.dq, trace_.dk, trace_.dv};
  }

 private:
  AttnParams params_;
  std::vector<double> q_, k_, v_, dout_;
  ReferenceTrace trace_;
};

void round_in_place(Precision p, std::vector<float>& x) {
  for (float& e : x) e = round_to(p, e);
}

// Inputs converted to fp32 once (the kernel rounds them to the precision); outputs allocated
// once and overwritten by each forward / backward. `upcast`: the kernel runs at fp32 on inputs
// rounded to config.precision, and outputs() rounds O, dQ, dK, dV once to it.
class CpuRun final : public VariantRun {
 public:
  CpuRun(const AttnParams& params, const RunConfig& config, const VariantInputs& in, bool upcast)
      : params_(params), stored_(config.precision), upcast_(upcast) {
    params_.precision = upcast ? Precision::f32 : config.precision;
    options_.mode = config.mode;
    options_.threads = config.threads;
    if (config.instrument) options_.trace = &trace_;
    const int64_t B = params.batch, H = params.heads, Hk = params.kv_heads;
    const int64_t Sq = params.seqlen_q, Sk = params.seqlen_k;
    const int64_t D = params.head_dim, Dv = params.head_dim_v;
    q_ = to_float(in.q, B * H * Sq * D);
    k_ = to_float(in.k, B * Hk * Sk * D);
    v_ = to_float(in.v, B * Hk * Sk * Dv);
    if (in.dout != nullptr) dout_ = to_float(in.dout, B * H * Sq * Dv);
    if (upcast_) {
      for (std::vector<float>* x : {&q_, &k_, &v_, &dout_}) round_in_place(stored_, *x);
    }
    o_.resize(B * H * Sq * Dv);
    lse_.resize(B * H * Sq);
    m_.resize(B * H * Sq);
    l_.resize(B * H * Sq);
    d_.resize(B * H * Sq);
    dq_.resize(B * H * Sq * D);
    dk_.resize(B * Hk * Sk * D);
    dv_.resize(B * Hk * Sk * Dv);
  }

  void forward() override {
    cpu_attention_forward(params_, options_, inputs(),
                          {o_.data(), lse_.data(), m_.data(), l_.data()});
  }

  void backward() override {
    cpu_attention_backward(params_, options_, inputs(), {o_.data(), m_.data(), l_.data()},
                           {d_.data(), dq_.data(), dk_.data(), dv_.data()});
  }

  VariantOutputs outputs() const override {
    return {stored(o_), to_double(lse_), stored(dq_), stored(dk_), stored(dv_)};
  }

 private:
  // An output as stored: rounded once to the precision when upcast (else already exact in it).
  std::vector<double> stored(std::vector<float> x) const {
    if (upcast_) round_in_place(stored_, x);
    return to_double(x);
  }

  CpuAttnInputs inputs() const {
    return {q_.data(), k_.data(), v_.data(), dout_.empty() ? nullptr : dout_.data()};
  }

  AttnParams params_;
  Precision stored_;
  bool upcast_;
  CpuAttnOptions options_;
  CpuTrace trace_;
  std::vector<float> q_, k_, v_, dout_;
  std::vector<float> o_, lse_, m_, l_, d_, dq_, dk_, dv_;
};

}  // namespace

std::unique_ptr<VariantRun> make_reference_run(const AttnParams& params, const RunConfig&,
                                               const VariantInputs& inputs) {
  return std::make_unique<ReferenceRun>(params, inputs);
}

std::unique_ptr<VariantRun> make_cpu_run(const AttnParams& params, const RunConfig& config,
                                         const VariantInputs& inputs) {
  return std::make_unique<CpuRun>(params, config, inputs, false);
}

std::unique_ptr<VariantRun> make_cpu_upcast_run(const AttnParams& params, const RunConfig& config,
                                                const VariantInputs& inputs) {
  RunConfig fused = config;
  fused.mode = Mode::fused;
  return std::make_unique<CpuRun>(params, fused, inputs, true);
}

}  // namespace attnscope
