// Public entry points of the CPU attention kernels: validation, rounding of the inputs to the
// emulated precision, and dispatch to the fused or unfused driver.
#include "kernels/cpu/fused_attention.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/forward_stages.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/head_matrices.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/pooled_cells.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_recorder.h"
#include "kernels/precision.h"

namespace attnscope {
namespace cpu {
namespace {

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

// src [rows x dim] rounded to the precision: src itself where it already holds values of the
// precision (an fp32 run, or the usual bf16 / fp16 dump), else a copy rounded in parallel chunks.
// row_max gets the largest magnitude of each row of the result, from the same pass: rounding
// is monotone in |x|, so a copy's row maxima are the source's rounded.
const float* rounded(Precision precision, const float* src, int64_t rows, int64_t dim,
                     Buffer<float>& copy, std::vector<float>& row_max, int threads) {
  const int64_t n = rows * dim;
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 16) / dim);
  const int64_t chunks = tile_count(rows, chunk_rows);
  threads = streaming_threads(threads, n * int64_t{sizeof(float)});
  row_max.resize(count(rows));
  std::vector<uint8_t> exact(count(chunks));
  parallel_for(chunks, threads, [&](int64_t chunk, int) {
    const int64_t r0 = chunk * chunk_rows, len = std::min(chunk_rows, rows - r0);
    exact[count(chunk)] = row_maxima(precision, src + r0 * dim, len, dim, row_max.data() + r0);
  });
  if (std::all_of(exact.begin(), exact.end(), [](uint8_t e) { return e != 0; })) return src;
  copy.resize(count(n));
  parallel_for(chunks, threads, [&](int64_t chunk, int) {
    const int64_t r0 = chunk * chunk_rows, len = std::min(chunk_rows, rows - r0);
    round_copy(precision, src + r0 * dim, copy.data() + r0 * dim, len * dim);
    for (int64_t r = r0; r < r0 + len; ++r) {
      row_max[count(r)] = static_cast<float>(round_to(precision, row_max[count(r)]));
    }
  });
  return copy.data();
}

}  // namespace

void validate(const AttnParams& p, const CpuAttnInputs& in) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("cpu_attention: " + what);
  };
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seqlen_q < 1 || p.seqlen_k < 1 ||
      p.head_dim < 1 || p.head_dim_v < 1) {
    fail("every size in AttnParams must be >= 1");
  }
  if (p.heads % p.kv_heads != 0) fail("kv_heads must divide heads (GQA)");
  if (in.q == nullptr || in.k == nullptr || in.v == nullptr) fail("q, k and v are required");
  if (!(p.dropout_p >= 0 && p.dropout_p < 1)) fail("dropout_p must lie in [0, 1)");
  if (p.dropout_keep == nullptr && p.dropout_p != 0) {
    fail("dropout_p needs the keep-mask dropout_keep (dropout is replayed, not sampled)");
  }
}

PreparedInputs prepare_inputs(const AttnParams& p, const CpuAttnInputs& in, bool backward,
                              bool traced, int threads) {
  const Precision precision = emulated_precision(p.precision);
  const int64_t q_rows = p.batch * p.heads * p.seqlen_q;
  const int64_t kv_rows = p.batch * p.kv_heads * p.seqlen_k;
  PreparedInputs x;
  x.q = backward || traced || rounds(precision)
            ? rounded(precision, in.q, q_rows, p.head_dim, x.q_copy, x.q_max, threads)
            : in.q;
  x.k = rounded(precision, in.k, kv_rows, p.head_dim, x.k_copy, x.k_max, threads);
  x.v = rounded(precision, in.v, kv_rows, p.head_dim_v, x.v_copy, x.v_max, threads);
  if (backward) {
    if (in.dout == nullptr) {
      x.dout_copy.assign(count(q_rows * p.head_dim_v), 1.0f);
      x.dout = x.dout_copy.data();
      x.dout_max.assign(count(q_rows), 1.0f);
    } else {
      x.dout = rounded(precision, in.dout, q_rows, p.head_dim_v, x.dout_copy, x.dout_max, threads);
    }
  }
  return x;
}

bool rows_finite(const std::vector<float>& row_max, int64_t row0, int64_t rows) {
  const auto first = row_max.begin() + row0;
  return std::all_of(first, first + rows, magnitude_finite);
}

Buffer<float> transpose_kv_tiles(const float* x, int64_t heads, int64_t sk, int64_t dim,
                                 int threads) {
  const int64_t n_kv = tile_count(sk, kTileCols), block = dim * kTileCols;
  Buffer<float> t(count(heads * n_kv * block));
  const int64_t bytes = heads * n_kv * block * int64_t{sizeof(float)};
  parallel_for(heads * n_kv, streaming_threads(threads, bytes), [&](int64_t item, int) {
    const int64_t j0 = (item % n_kv) * kTileCols, cols = std::min(kTileCols, sk - j0);
    float* dst = t.data() + item * block;
    transpose(cols, dim, x + ((item / n_kv) * sk + j0) * dim, dim, dst, kTileCols);
    for (int64_t e = 0; e < dim && cols < kTileCols; ++e) {
      std::fill(dst + e * kTileCols + cols, dst + (e + 1) * kTileCols, 0.0f);
    }
  });
  return t;
}

int64_t kt_pairs_block(int64_t dim) {
  return (dim + 1) / 2 * kTileCols;
}

int64_t v_pairs_block(int64_t dim) {
  return kTileCols / 2 * paired_ld(dim);
}

Buffer<uint32_t> pair_kt_tiles(const float* k, int64_t heads, int64_t sk, int64_t dim,
                               int threads) {
  const int64_t n_kv = tile_count(sk, kTileCols);
  Buffer<uint32_t> pairs(count(heads * n_kv * kt_pairs_block(dim)));
  const int64_t bytes = heads * sk * dim * int64_t{sizeof(float)};
  parallel_for(heads * n_kv, streaming_threads(threads, bytes), [&](int64_t item, int) {
    const int64_t j0 = (item % n_kv) * kTileCols;
    pair_rows_transposed(std::min(kTileCols, sk - j0), dim, k + ((item / n_kv) * sk + j0) * dim,
                         dim, kTileCols, pairs.data() + item * kt_pairs_block(dim));
  });
  return pairs;
}

Buffer<uint32_t> pair_v_tiles(const float* v, int64_t heads, int64_t sk, int64_t dim, int threads) {
  const int64_t n_kv = tile_count(sk, kTileCols);
  Buffer<uint32_t> pairs(count(heads * n_kv * v_pairs_block(dim)));
  const int64_t bytes = heads * sk * dim * int64_t{sizeof(float)};
  parallel_for(heads * n_kv, streaming_threads(threads, bytes), [&](int64_t item, int) {
    const int64_t j0 = (item % n_kv) * kTileCols;
    pair_columns(std::min(kTileCols, sk - j0), dim, v + ((item / n_kv) * sk + j0) * dim, dim,
                 pairs.data() + item * v_pairs_block(dim));
  });
  return pairs;
}

std::vector<uint8_t> finite_kv_tiles(const AttnParams& p, const PreparedInputs& in) {
  const int64_t n_kv = tile_count(p.seqlen_k, kTileCols);
  std::vector<uint8_t> finite(count(p.batch * p.kv_heads * n_kv));
  for (int64_t item = 0; item < p.batch * p.kv_heads * n_kv; ++item) {
    const int64_t j0 = (item % n_kv) * kTileCols, cols = std::min(kTileCols, p.seqlen_k - j0);
    const int64_t row = (item / n_kv) * p.seqlen_k + j0;
    finite[count(item)] = rows_finite(in.k_max, row, cols) && rows_finite(in.v_max, row, cols);
  }
  return finite;
}

namespace {

// Makes `cells` the cells capture c pools into; staged: the tiles arrive kv tile by kv tile (the
// fused backward), else q tile by q tile.
void make_pooled_cells(const AttnParams& params, Mode mode, const PooledCapture& c, int threads,
                       bool staged, std::optional<PooledCells>& cells) {
  if (c.b < 0 || c.b >= params.batch || c.h < 0 || c.h >= params.heads) {
    throw std::invalid_argument("cpu_attention: pooled capture batch / head out of range");
  }
  cells.emplace(make_head_context(params, mode, c.b, c.h), c.window, c.out_rows, c.out_cols,
                c.which, mode == Mode::fused ? kTileCols : params.seqlen_k, threads, staged);
}

}  // namespace

}  // namespace cpu

void cpu_attention_forward(const AttnParams& params, const CpuAttnOptions& options,
                           const CpuAttnInputs& inputs, const CpuForwardOutputs& out) {
  cpu::validate(params, inputs);
  if (out.o == nullptr && (options.mode != Mode::fused || options.trace != nullptr)) {
    throw std::invalid_argument(
        "cpu_attention: a forward without O (the statistics alone) runs fused, untraced");
  }
  const int threads = cpu::resolve_threads(options.threads);
  const cpu::PreparedInputs in =
      cpu::prepare_inputs(params, inputs, false, options.trace != nullptr, threads);
  std::optional<cpu::TraceRecorder> rec;
  if (options.trace != nullptr)
    rec.emplace(params, options.mode, in, false, threads, *options.trace);
  cpu::TraceRecorder* r = rec ? &*rec : nullptr;
  std::optional<cpu::PooledCells> pooled;
  if (PooledCapture* c = options.pooled_s; c != nullptr) {
    const MatrixSelection& w = c->which;
    if (options.mode != Mode::fused || !w.s || w.p || w.dp || w.ds) {
      throw std::invalid_argument("cpu_attention: a forward pools S alone, in fused mode");
    }
    cpu::make_pooled_cells(params, options.mode, *c, threads, false, pooled);
  }
  cpu::PooledCells* p = pooled ? &*pooled : nullptr;
  const cpu::CancelPoll cancel(options.cancelled);
  if (options.mode == Mode::fused) {
    cpu::fused_forward(params, in, threads, out, r, p, cancel);
  } else {
    cpu::unfused_forward(params, in, threads, out, r, cancel);
  }
  if (r != nullptr) r->finish_forward(out);
  if (p != nullptr) options.pooled_s->result = p->finish();
}

void cpu_attention_backward(const AttnParams& params, const CpuAttnOptions& options,
                            const CpuAttnInputs& inputs, const CpuForwardView& fwd,
                            const CpuBackwardOutputs& out) {
  cpu::validate(params, inputs);
  const int threads = cpu::resolve_threads(options.threads);
  const cpu::PreparedInputs in =
      cpu::prepare_inputs(params, inputs, true, options.trace != nullptr, threads);
  std::optional<cpu::TraceRecorder> rec;
  if (options.trace != nullptr)
    rec.emplace(params, options.mode, in, true, threads, *options.trace);
  cpu::TraceRecorder* r = rec ? &*rec : nullptr;
  std::optional<cpu::PooledCells> pooled;
  if (PooledCapture* c = options.pooled; c != nullptr) {
    cpu::make_pooled_cells(params, options.mode, *c, threads, options.mode == Mode::fused, pooled);
  }
  cpu::PooledCells* p = pooled ? &*pooled : nullptr;
  const cpu::CancelPoll cancel(options.cancelled);
  if (options.mode == Mode::fused) {
    cpu::fused_backward(params, in, fwd, threads, out, r, p, cancel);
  } else {
    cpu::unfused_backward(params, in, threads, out, r, p, cancel);
  }
  if (r != nullptr) r->finish_backward(out);
  if (p != nullptr) options.pooled->result = p->finish();
}

void cpu_attention_forward(const AttnParams& params, const CpuAttnOptions& options,
                           const CpuAttnInputs& inputs, CpuAttnResult& r) {
  const auto q_rows = static_cast<size_t>(params.batch * params.heads * params.seqlen_q);
  r.o.resize(q_rows * static_cast<size_t>(params.head_dim_v));
  r.lse.resize(q_rows);
  r.m.resize(q_rows);
  r.l.resize(q_rows);
  cpu_attention_forward(params, options, inputs,
                        {r.o.data(), r.lse.data(), r.m.data(), r.l.data()});
}

void cpu_attention_backward(const AttnParams& params, const CpuAttnOptions& options,
                            const CpuAttnInputs& inputs, CpuAttnResult& r) {
  const auto q_rows = static_cast<size_t>(params.batch * params.heads * params.seqlen_q);
  const auto kv_rows = static_cast<size_t>(params.batch * params.kv_heads * params.seqlen_k);
  r.d.resize(q_rows);
  r.dq.resize(q_rows * static_cast<size_t>(params.head_dim));
  r.dk.resize(kv_rows * static_cast<size_t>(params.head_dim));
  r.dv.resize(kv_rows * static_cast<size_t>(params.head_dim_v));
  cpu_attention_backward(params, options, inputs, {r.o.data(), r.m.data(), r.l.data()},
                         {r.d.data(), r.dq.data(), r.dk.data(), r.dv.data()});
}

CpuAttnResult cpu_attention(const AttnParams& params, const CpuAttnOptions& options,
                            const CpuAttnInputs& inputs) {
  CpuAttnResult r;
  cpu_attention_forward(params, options, inputs, r);
  cpu_attention_backward(params, options, inputs, r);
  return r;
}

}  // namespace attnscope
