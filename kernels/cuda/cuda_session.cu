// CudaAttention (cuda_attention.h): device buffers of one prepared run, the upload of inputs
// rounded to the precision, the launch sequence of forward and backward, and the downloads of
// outputs and instrumentation. Everything runs on the legacy default stream.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_attention.h"
#include "kernels/cuda/cuda_kernels.cuh"

namespace attnscope::cuda {
namespace {

// Owning device allocation of `bytes` (zero-filled).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc");
    check_cuda(cudaMemset(ptr_, 0, bytes), "cudaMemset");
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <typename U>
  U* as() const {
    return static_cast<U*>(ptr_);
  }
  void upload(const void* src, size_t bytes) {
    check_cuda(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy upload");
  }
  template <typename U>
  std::vector<U> download(size_t n) const {
    std::vector<U> out(n);
    if (n > 0)
      check_cuda(cudaMemcpy(out.data(), ptr_, n * sizeof(U), cudaMemcpyDeviceToHost),
                 "cudaMemcpy download");
    return out;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}

// Storage bits of fp32 values rounded to the precision (2 bytes per element at f16 / bf16).
std::vector<uint8_t> storage_of(Precision p, const float* x, int64_t n, float fill) {
  const int es = p == Precision::f16 || p == Precision::bf16 ? 2 : 4;
  std::vector<uint8_t> out(sz(n) * es);
  for (int64_t e = 0; e < n; ++e) {
    const float v = x != nullptr ? x[e] : fill;
    if (es == 4) {
      std::memcpy(out.data() + e * 4, &v, 4);
    } else {
      const uint16_t bits = p == Precision::f16 ? to_half_bits(v) : to_bf16_bits(v);
      std::memcpy(out.data() + e * 2, &bits, 2);
    }
  }
  return out;
}

std::vector<float> floats_of(Precision p, const std::vector<uint8_t>& raw) {
  const bool half = p == Precision::f16 || p == Precision::bf16;
  std::vector<float> out(raw.size() / (half ? 2 : 4));
  for (size_t e = 0; e < out.size(); ++e) {
    if (!half) {
      std::memcpy(&out[e], raw.data() + e * 4, 4);
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, raw.data() + e * 2, 2);
    out[e] = p == Precision::f16 ? from_half_bits(bits) : from_bf16_bits(bits);
  }
  return out;
}

// Elements spanned by a broadcast [B, H, Sq, Sk] operand with non-negative strides.
int64_t broadcast_extent(const AttnParams& p, const BroadcastStrides& st) {
  return (p.batch - 1) * st.b + (p.heads - 1) * st.h + (p.seqlen_q - 1) * st.q +
         (p.seqlen_k - 1) * st.k + 1;
}

std::vector<double> norms_of(const std::vector<double>& squares) {
  std::vector<double> out(squares.size());
  for (size_t e = 0; e < out.size(); ++e) out[e] = std::sqrt(squares[e]);
  return out;
}

// Row norms [rows] (fp32) and the norms of each block of rows_per_head rows.
void row_and_head_norms(const std::vector<double>& squares, int64_t rows_per_head,
                        std::vector<float>& rows, std::vector<double>& heads) {
  rows.resize(squares.size());
  heads.assign(squares.size() / sz(rows_per_head), 0.0);
  for (size_t e = 0; e < squares.size(); ++e) {
    rows[e] = static_cast<float>(std::sqrt(squares[e]));
    heads[e / sz(rows_per_head)] += squares[e];
  }
  heads = norms_of(heads);
}

// Device accumulators of one pooled matrix of n cells (empty when not selected).
struct PoolBuffers {
  DeviceBuffer max, min, finite, nan, pos_inf, neg_inf, masked, sum;
  size_t n = 0;

  PoolBuffers(bool selected, size_t cells) : n(selected ? cells : 0) {
    if (n == 0) return;
    for (DeviceBuffer* b : {&max, &min, &finite, &nan, &pos_inf, &neg_inf, &masked}) {
      *b = DeviceBuffer(n * sizeof(int));
    }
    sum = DeviceBuffer(n * sizeof(double));
    const float inf = cuda::pos_inf();  // the member pos_inf shadows the function
    const std::vector<int> lo(n, ordered_int(-inf)), hi(n, ordered_int(inf));
    max.upload(lo.data(), n * sizeof(int));
    min.upload(hi.data(), n * sizeof(int));
  }
  PoolCells cells() const {
    return {max.as<int>(),     min.as<int>(),     finite.as<int>(), nan.as<int>(),
            pos_inf.as<int>(), neg_inf.as<int>(), masked.as<int>(), sum.as<double>()};
  }
  // PooledMatrix of the accumulated cells: max / min / mean NaN where no finite entry; totals
  // summed over the cells.
  PooledMatrix download() const {
    PooledMatrix m;
    if (n == 0) return m;
    m.finite = finite.download<int32_t>(n);
    m.nan = nan.download<int32_t>(n);
    m.pos_inf = pos_inf.download<int32_t>(n);
    m.neg_inf = neg_inf.download<int32_t>(n);
    m.masked = masked.download<int32_t>(n);
    const std::vector<int> hi = max.download<int>(n), lo = min.download<int>(n);
    const std::vector<double> total = sum.download<double>(n);
    m.max.resize(n);
    m.min.resize(n);
    m.mean.resize(n);
    for (size_t e = 0; e < n; ++e) {
      const bool any = m.finite[e] > 0;
      m.max[e] = any ? ordered_float(hi[e]) : quiet_nan();
      m.min[e] = any ? ordered_float(lo[e]) : quiet_nan();
      m.mean[e] = any ? static_cast<float>(total[e] / m.finite[e]) : quiet_nan();
      m.totals += {m.finite[e], m.nan[e], m.pos_inf[e], m.neg_inf[e], m.masked[e]};
    }
    return m;
  }
};

}  // namespace

struct CudaAttention::Impl {
  AttnParams p;
  bool instrument = false;
  int es = 4;
  int64_t n_q = 0, n_kv = 0;
  DeviceBuffer q, k, v, dout, o, lse, m, l, d, dq_acc, dq, dk, dv, mask, bias, kv_clean, q_clean;
  DeviceBuffer fwd_tiles, bwd_tiles, row_causes, dq_sq, dk_sq, dv_sq, fwd_counts, bwd_counts,
      poisoned;
  bool forward_done = false, backward_done = false;

  template <typename T>
  Args<T> args() const {
    Args<T> a{};
    a.batch = p.batch;
    a.heads = p.heads;
    a.kv_heads = p.kv_heads;
    a.sq = p.seqlen_q;
    a.sk = p.seqlen_k;
    a.dim = p.head_dim;
    a.dim_v = p.head_dim_v;
    a.group = p.group_size();
    a.dim_pad = pad16(p.head_dim);
    a.dim_v_pad = pad16(p.head_dim_v);
    a.n_q = static_cast<int>(n_q);
    a.n_kv = static_cast<int>(n_kv);
    a.scale = static_cast<float>(p.scale);
    a.softcap = static_cast<float>(p.softcap);
    a.fill = static_cast<float>(mask_fill_value(p.mask_fill, p.precision));
    a.causal = p.causal;
    a.safe = p.mask_fill == MaskFill::safe;
    a.fill_neg_inf = a.fill == -pos_inf();
    a.shift = causal_shift(p.causal_align == CausalAlign::bottom_right, p.seqlen_q, p.seqlen_k);
    a.precision = p.precision;
    a.mask = p.mask != nullptr ? mask.as<uint8_t>() : nullptr;
    a.mask_st = p.mask_strides;
    a.bias = p.bias != nullptr ? bias.as<float>() : nullptr;
    a.bias_st = p.bias_strides;
    a.q = q.as<T>();
    a.k = k.as<T>();
    a.v = v.as<T>();
    a.dout = dout.as<T>();
    a.o = o.as<T>();
    a.lse = lse.as<float>();
    a.m = m.as<float>();
    a.l = l.as<float>();
    a.d = d.as<float>();
    a.dq_acc = dq_acc.as<float>();
    a.dq = dq.as<T>();
    a.dk = dk.as<T>();
    a.dv = dv.as<T>();
    a.kv_clean = kv_clean.as<uint8_t>();
    a.q_clean = q_clean.as<uint8_t>();
    a.fwd_tiles = instrument ? fwd_tiles.as<TileStats>() : nullptr;
    a.bwd_tiles = instrument ? bwd_tiles.as<TileStats>() : nullptr;
    a.row_causes = instrument ? row_causes.as<uint32_t>() : nullptr;
    return a;
  }

  template <typename T>
  void run_forward() {
    const Args<T> a = args<T>();
    launch_forward(a, nullptr);
    if (instrument) launch_forward_provenance(a, fwd_counts.as<unsigned long long>(), nullptr);
  }

  template <typename T>
  void run_backward() {
    const Args<T> a = args<T>();
    launch_backward_preprocess(a, nullptr);
    launch_backward(a, nullptr);
    if (!instrument) return;
    const int64_t q_rows = p.batch * p.heads * p.seqlen_q,
                  kv_rows = p.batch * p.kv_heads * p.seqlen_k;
    launch_row_squares(a.dq, q_rows, p.head_dim, dq_sq.as<double>(), nullptr);
    launch_row_squares(a.dk, kv_rows, p.head_dim, dk_sq.as<double>(), nullptr);
    launch_row_squares(a.dv, kv_rows, p.head_dim_v, dv_sq.as<double>(), nullptr);
    launch_backward_provenance(a, bwd_counts.as<unsigned long long>(), poisoned.as<uint32_t>(),
                               nullptr);
  }

  template <typename Fn>
  void dispatch(Fn&& fn) {
    if (p.precision == Precision::f16) {
      fn(__half{});
    } else if (p.precision == Precision::bf16) {
      fn(__nv_bfloat16{});
    } else {
      fn(float{});
    }
  }

  void synchronize(const char* what) {
    check_cuda(cudaGetLastError(), what);
    check_cuda(cudaDeviceSynchronize(), what);
  }
};

CudaAttention::CudaAttention(const AttnParams& params, const CpuAttnInputs& in, bool instrument)
    : impl_(std::make_unique<Impl>()) {
  const std::string why = unsupported_reason(params);
  if (!why.empty()) throw std::invalid_argument("cuda attention: " + why);
  if (device_count() == 0) throw std::runtime_error("cuda attention: " + device_description());
  if (in.q == nullptr || in.k == nullptr || in.v == nullptr) {
    throw std::invalid_argument("cuda attention: q, k and v are required");
  }
  Impl& s = *impl_;
  s.p = params;
  s.instrument = instrument;
  const Precision pr = params.precision;
  s.es = pr == Precision::f16 || pr == Precision::bf16 ? 2 : 4;
  const int64_t B = params.batch, H = params.heads, Hk = params.kv_heads;
  const int64_t Sq = params.seqlen_q, Sk = params.seqlen_k, D = params.head_dim,
                Dv = params.head_dim_v;
  s.n_q = (Sq + kTileRows - 1) / kTileRows;
  s.n_kv = (Sk + kTileCols - 1) / kTileCols;
  const auto upload = [&](DeviceBuffer& buf, const float* x, int64_t n) {
    const std::vector<uint8_t> raw = storage_of(pr, x, n, 1.0f);
    buf = DeviceBuffer(raw.size());
    buf.upload(raw.data(), raw.size());
  };
  upload(s.q, in.q, B * H * Sq * D);
  upload(s.k, in.k, B * Hk * Sk * D);
  upload(s.v, in.v, B * Hk * Sk * Dv);
  upload(s.dout, in.dout, B * H * Sq * Dv);  // ones when absent
  if (params.mask != nullptr) {
    const int64_t n = broadcast_extent(params, params.mask_strides);
    s.mask = DeviceBuffer(sz(n));
    s.mask.upload(params.mask, sz(n));
  }
  if (params.bias != nullptr) {
    const int64_t n = broadcast_extent(params, params.bias_strides);
    std::vector<float> bias(sz(n));
    for (int64_t e = 0; e < n; ++e)
      bias[sz(e)] = round_to_precision(pr, static_cast<float>(params.bias[e]));
    s.bias = DeviceBuffer(bias.size() * sizeof(float));
    s.bias.upload(bias.data(), bias.size() * sizeof(float));
  }
  s.o = DeviceBuffer(sz(B * H * Sq * Dv) * s.es);
  for (DeviceBuffer* b : {&s.lse, &s.m, &s.l, &s.d})
    *b = DeviceBuffer(sz(B * H * Sq) * sizeof(float));
  s.dq_acc = DeviceBuffer(sz(B * H * Sq * D) * sizeof(float));
  s.dq = DeviceBuffer(sz(B * H * Sq * D) * s.es);
  s.dk = DeviceBuffer(sz(B * Hk * Sk * D) * s.es);
  s.dv = DeviceBuffer(sz(B * Hk * Sk * Dv) * s.es);
  s.kv_clean = DeviceBuffer(sz(B * Hk * s.n_kv));
  s.q_clean = DeviceBuffer(sz(B * H * s.n_q));
  if (instrument) {
    const size_t tiles = sz(B * H * s.n_q * s.n_kv) * sizeof(TileStats);
    s.fwd_tiles = DeviceBuffer(tiles);
    s.bwd_tiles = DeviceBuffer(tiles);
    s.row_causes = DeviceBuffer(sz(B * H * Sq) * sizeof(uint32_t));
    s.dq_sq = DeviceBuffer(sz(B * H * Sq) * sizeof(double));
    s.dk_sq = DeviceBuffer(sz(B * Hk * Sk) * sizeof(double));
    s.dv_sq = DeviceBuffer(sz(B * Hk * Sk) * sizeof(double));
    s.fwd_counts = DeviceBuffer(kProvenanceCodes * sizeof(unsigned long long));
    s.bwd_counts = DeviceBuffer(kProvenanceCodes * sizeof(unsigned long long));
    s.poisoned = DeviceBuffer(sz(B * Hk) * sizeof(uint32_t));
  }
  s.dispatch([&](auto tag) {
    using T = decltype(tag);
    launch_kv_clean(s.args<T>(), s.kv_clean.as<uint8_t>(), nullptr);
  });
  s.synchronize("kv_clean");
}

CudaAttention::~CudaAttention() = default;

void CudaAttention::forward() {
  impl_->dispatch([&](auto tag) { impl_->run_forward<decltype(tag)>(); });
  impl_->synchronize("forward");
  impl_->forward_done = true;
}

void CudaAttention::backward() {
  if (!impl_->forward_done) throw std::logic_error("cuda attention: backward() before forward()");
  impl_->dispatch([&](auto tag) { impl_->run_backward<decltype(tag)>(); });
  impl_->synchronize("backward");
  impl_->backward_done = true;
}

CudaOutputs CudaAttention::outputs() const {
  const Impl& s = *impl_;
  const AttnParams& p = s.p;
  const int64_t rows = p.batch * p.heads * p.seqlen_q, kv_rows = p.batch * p.kv_heads * p.seqlen_k;
  CudaOutputs out;
  if (s.forward_done) {
    out.o = floats_of(p.precision, s.o.download<uint8_t>(sz(rows * p.head_dim_v) * s.es));
    out.lse = s.lse.download<float>(sz(rows));
    out.m = s.m.download<float>(sz(rows));
    out.l = s.l.download<float>(sz(rows));
  }
  if (s.backward_done) {
    out.d = s.d.download<float>(sz(rows));
    out.dq = floats_of(p.precision, s.dq.download<uint8_t>(sz(rows * p.head_dim) * s.es));
    out.dk = floats_of(p.precision, s.dk.download<uint8_t>(sz(kv_rows * p.head_dim) * s.es));
    out.dv = floats_of(p.precision, s.dv.download<uint8_t>(sz(kv_rows * p.head_dim_v) * s.es));
  }
  return out;
}

PooledHeadMatrices CudaAttention::pooled_matrices(int64_t b, int64_t h, int64_t out_rows,
                                                  int64_t out_cols, MatrixWindow window,
                                                  MatrixSelection which) const {
  Impl& s = *impl_;
  if (which.dp || which.ds) {
    throw std::invalid_argument("cuda pooled_matrices: dP and dS are pooled on the CPU only");
  }
  if (!which.s && !which.p) throw std::invalid_argument("cuda pooled_matrices: select s and/or p");
  if (which.p && !s.forward_done) throw std::logic_error("cuda pooled_matrices: P needs forward()");
  if (b < 0 || b >= s.p.batch || h < 0 || h >= s.p.heads) {
    throw std::invalid_argument("cuda pooled_matrices: batch / head index out of range");
  }
  PooledHeadMatrices out;
  out.window = resolve_window(s.p, window);
  const MatrixWindow& w = out.window;
  const int64_t R = w.row_end - w.row_begin, C = w.col_end - w.col_begin;
  out.rows = std::clamp<int64_t>(out_rows, 1, R);
  out.cols = std::clamp<int64_t>(out_cols, 1, C);
  for (int64_t e = 0; e <= out.rows; ++e) out.row_edges.push_back(w.row_begin + e * R / out.rows);
  for (int64_t e = 0; e <= out.cols; ++e) out.col_edges.push_back(w.col_begin + e * C / out.cols);
  const size_t cells = sz(out.rows * out.cols);
  const PoolBuffers s_buf(which.s, cells), p_buf(which.p, cells);
  const PoolWindow pw{b, h, w.row_begin, w.row_end, w.col_begin, w.col_end, out.rows, out.cols};
  s.dispatch([&](auto tag) {
    using T = decltype(tag);
    launch_pooled(s.args<T>(), pw, s_buf.cells(), p_buf.cells(), nullptr);
  });
  s.synchronize("pooled_matrices");
  out.s = s_buf.download();
  out.p = p_buf.download();
  return out;
}

CudaTrace CudaAttention::trace() const {
  const Impl& s = *impl_;
  const AttnParams& p = s.p;
  CudaTrace t;
  t.q_tiles = s.n_q;
  t.kv_tiles = s.n_kv;
  if (!s.instrument) return t;
  const int64_t rows = p.batch * p.heads * p.seqlen_q, kv_rows = p.batch * p.kv_heads * p.seqlen_k;
  const size_t tiles = sz(p.batch * p.heads * s.n_q * s.n_kv);
  if (s.forward_done) {
    t.m = s.m.download<float>(sz(rows));
    t.l = s.l.download<float>(sz(rows));
    t.lse = s.lse.download<float>(sz(rows));
    t.row_causes = s.row_causes.download<uint32_t>(sz(rows));
    t.forward_tiles = s.fwd_tiles.download<TileStats>(tiles);
    const auto counts = s.fwd_counts.download<unsigned long long>(kProvenanceCodes);
    t.forward_provenance.assign(counts.begin(), counts.end());
  }
  if (s.backward_done) {
    t.backward_tiles = s.bwd_tiles.download<TileStats>(tiles);
    t.d = s.d.download<float>(sz(rows));
    row_and_head_norms(s.dq_sq.download<double>(sz(rows)), p.seqlen_q, t.dq_row_norm,
                       t.dq_head_norm);
    row_and_head_norms(s.dk_sq.download<double>(sz(kv_rows)), p.seqlen_k, t.dk_row_norm,
                       t.dk_head_norm);
    row_and_head_norms(s.dv_sq.download<double>(sz(kv_rows)), p.seqlen_k, t.dv_row_norm,
                       t.dv_head_norm);
    const auto counts = s.bwd_counts.download<unsigned long long>(kProvenanceCodes);
    t.backward_provenance.assign(counts.begin(), counts.end());
  }
  return t;
}

}  // namespace attnscope::cuda
