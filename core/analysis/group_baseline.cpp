// GroupBaseline (see group_baseline.h): per batch of a round, the fp32 inputs read from the case,
// the unfused kernel on the problem of those groups (mask, bias and keep-mask pointers moved to
// their first head), and the gathered lse and batch sums.
#include "core/analysis/group_baseline.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cpu/buffer.h"

namespace attnscope {
namespace {

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

// Elements [first, first + n) of `t` as fp32.
std::vector<float> read_float(const HostTensor& t, int64_t first, int64_t n) {
  std::vector<float> out(at(n));
  t.read_float(first, n, out.data());
  return out;
}

// A broadcast tensor's pointer at (b, first head h0).
template <typename T>
const T* moved(const T* x, const BroadcastStrides& st, int64_t b, int64_t h0) {
  return x == nullptr ? nullptr : x + b * st.b + h0 * st.h;
}

}  // namespace

GroupBaseline::GroupBaseline(const CaseData& data, const AttnParams& params, bool gradients,
                             int threads)
    : data_(data), p_(params), gradients_(gradients), threads_(threads) {
  lse_.resize(at(p_.batch * p_.heads * p_.seqlen_q));
  const CaseDims& dims = data.info.dims;
  if (dims.batch_summed("dq")) dq_sum_.assign(at(p_.heads * p_.seqlen_q * p_.head_dim), 0.0);
  if (dims.batch_summed("dk")) dk_sum_.assign(at(p_.kv_heads * p_.seqlen_k * p_.head_dim), 0.0);
  if (dims.batch_summed("dv")) dv_sum_.assign(at(p_.kv_heads * p_.seqlen_k * p_.head_dim_v), 0.0);
}

void GroupBaseline::run(int64_t first, int64_t last) {
  round_.clear();  // the previous round's outputs, freed before the next are made
  for (int64_t bkv = first; bkv < last;) {
    const int64_t b = bkv / p_.kv_heads, g0 = bkv % p_.kv_heads;
    const int64_t g1 = std::min(p_.kv_heads, g0 + (last - bkv));
    run_piece(b, g0, g1);
    bkv += g1 - g0;
  }
}

void GroupBaseline::run_piece(int64_t b, int64_t g0, int64_t g1) {
  const int64_t G = p_.group_size(), Sq = p_.seqlen_q, Sk = p_.seqlen_k;
  const int64_t D = p_.head_dim, Dv = p_.head_dim_v, n = g1 - g0, h0 = g0 * G;
  const int64_t first = b * p_.kv_heads + g0;
  AttnParams some = p_;
  some.batch = 1;
  some.heads = n * G;
  some.kv_heads = n;
  some.mask = moved(p_.mask, p_.mask_strides, b, h0);
  some.bias = moved(p_.bias, p_.bias_strides, b, h0);
  some.dropout_keep = moved(p_.dropout_keep, p_.dropout_strides, b, h0);
  const std::vector<float> q = read_float(data_.q(), first * G * Sq * D, n * G * Sq * D);
  const std::vector<float> k = read_float(data_.k(), first * Sk * D, n * Sk * D);
  const std::vector<float> v = read_float(data_.v(), first * Sk * Dv, n * Sk * Dv);
  const HostTensor* dout = data_.find("do");
  const std::vector<float> d = dout != nullptr
                                   ? read_float(*dout, first * G * Sq * Dv, n * G * Sq * Dv)
                                   : std::vector<float>{};
  CpuAttnOptions options;
  options.mode = Mode::unfused;
  options.threads = threads_;
  const CpuAttnInputs inputs{q.data(), k.data(), v.data(), dout != nullptr ? d.data() : nullptr};
  Piece& piece = round_.emplace_back();
  piece.first = first;
  piece.count = n;
  cpu_attention_forward(some, options, inputs, piece.out);
  if (gradients_) cpu_attention_backward(some, options, inputs, piece.out);
  cpu::buffer_pool_clear();
  const CpuAttnResult& out = piece.out;
  std::copy(out.lse.begin(), out.lse.end(), lse_.begin() + first * G * Sq);
  // Summed in batch order: b = 0, 1, ... reach each head's sum in turn.
  const auto add = [](std::vector<double>& sum, const std::vector<float>& x, int64_t offset) {
    for (size_t e = 0; e < x.size(); ++e) sum[at(offset) + e] += static_cast<double>(x[e]);
  };
  if (!dq_sum_.empty()) add(dq_sum_, out.dq, h0 * Sq * D);
  if (!dk_sum_.empty()) add(dk_sum_, out.dk, g0 * Sk * D);
  if (!dv_sum_.empty()) add(dv_sum_, out.dv, g0 * Sk * Dv);
}

ValueReader GroupBaseline::reader(const std::string& name) const {
  if (name == "lse") return values_of(lse_);
  const std::vector<double>& sum = name == "dq" ? dq_sum_ : name == "dk" ? dk_sum_ : dv_sum_;
  if (name != "o" && !sum.empty()) return values_of(sum);
  std::vector<float> CpuAttnResult::*member = name == "o"    ? &CpuAttnResult::o
                                              : name == "dq" ? &CpuAttnResult::dq
                                              : name == "dk" ? &CpuAttnResult::dk
                                                             : &CpuAttnResult::dv;
  const bool kv = name == "dk" || name == "dv";
  const int64_t rows = kv ? p_.seqlen_k : p_.group_size() * p_.seqlen_q;
  const int64_t per_group = rows * (name == "o" || name == "dv" ? p_.head_dim_v : p_.head_dim);
  // A range read is one head, within one group.
  return [this, member, per_group](int64_t first, int64_t n, double* out) {
    const int64_t bkv = first / per_group;
    for (const Piece& piece : round_) {
      if (bkv < piece.first || bkv >= piece.first + piece.count) continue;
      const std::vector<float>& x = piece.out.*member;
      const int64_t base = piece.first * per_group;
      for (int64_t e = 0; e < n; ++e) out[e] = static_cast<double>(x[at(first - base + e)]);
      return;
    }
    throw std::out_of_range("GroupBaseline: group " + std::to_string(bkv) + " was not run");
  };
}

}  // namespace attnscope
