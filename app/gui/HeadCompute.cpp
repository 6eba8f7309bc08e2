// Recomputation of one (batch, head) for the views: the head is cut out of the case into a
// B = H = Hk = 1 problem (mask / bias pointers offset, strides kept), then the CPU kernels run.
#include "app/gui/HeadCompute.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace attnscope {
namespace {

// One head of a case as its own single-head problem.
struct HeadSlice {
  AttnParams params;
  std::vector<float> q, k, v, dout;

  CpuAttnInputs inputs() const {
    return {q.data(), k.data(), v.data(), dout.empty() ? nullptr : dout.data()};
  }
};

std::vector<float> slice_f32(const std::vector<double>& x, int64_t offset, int64_t n) {
  return std::vector<float>(x.begin() + offset, x.begin() + offset + n);
}

HeadSlice slice_head(const CaseInputs& in, int64_t b, int64_t h) {
  const AttnParams& p = in.params;
  HeadSlice s;
  s.params = p;
  s.params.batch = s.params.heads = s.params.kv_heads = 1;
  const int64_t kvh = p.kv_head_of(h);
  const int64_t q_head = (b * p.heads + h) * p.seqlen_q;
  const int64_t k_head = (b * p.kv_heads + kvh) * p.seqlen_k;
  s.q = slice_f32(in.q, q_head * p.head_dim, p.seqlen_q * p.head_dim);
  s.k = slice_f32(in.k, k_head * p.head_dim, p.seqlen_k * p.head_dim);
  s.v = slice_f32(in.v, k_head * p.head_dim_v, p.seqlen_k * p.head_dim_v);
  if (in.has_dout) s.dout = slice_f32(in.dout, q_head * p.head_dim_v, p.seqlen_q * p.head_dim_v);
  if (p.mask != nullptr) s.params.mask = p.mask + b * p.mask_strides.b + h * p.mask_strides.h;
  if (p.bias != nullptr) s.params.bias = p.bias + b * p.bias_strides.b + h * p.bias_strides.h;
  return s;
}

CellClass classify(float x, bool masked) {
  if (std::isnan(x)) return CellClass::nan;
  if (masked) return CellClass::masked;
  if (std::isinf(x)) return x > 0 ? CellClass::pos_inf : CellClass::neg_inf;
  return CellClass::value;
}

void count_class(OverlayCounts& c, CellClass cls, int64_t n) {
  switch (cls) {
    case CellClass::nan:
      c.nan += n;
      break;
    case CellClass::pos_inf:
      c.pos_inf += n;
      break;
    case CellClass::neg_inf:
      c.neg_inf += n;
      break;
    case CellClass::masked:
      c.masked += n;
      break;
    case CellClass::value:
      break;
  }
}

std::vector<int64_t> unit_edges(int64_t begin, int64_t n) {
  std::vector<int64_t> edges(static_cast<size_t>(n + 1));
  for (int64_t e = 0; e <= n; ++e) edges[static_cast<size_t>(e)] = begin + e;
  return edges;
}

// A full-resolution grid of `raw` values over rows [r0, r0 + rows) x cols [c0, c0 + cols);
// masked may be empty (nothing masked).
MatrixGrid full_grid(const char* name, std::vector<float> raw, const std::vector<uint8_t>& masked,
                     int64_t r0, int64_t rows, int64_t c0, int64_t cols, int64_t total_rows,
                     int64_t total_cols) {
  MatrixGrid g;
  g.name = name;
  g.rows = rows;
  g.cols = cols;
  g.total_rows = total_rows;
  g.total_cols = total_cols;
  g.row_edges = unit_edges(r0, rows);
  g.col_edges = unit_edges(c0, cols);
  const size_t n = raw.size();
  g.value.resize(n);
  g.cls.resize(n);
  for (size_t e = 0; e < n; ++e) {
    const CellClass cls = classify(raw[e], !masked.empty() && masked[e] != kEntryVisible);
    g.cls[e] = cls;
    g.value[e] = cls == CellClass::value ? raw[e] : std::nanf("");
    count_class(g.counts, cls, 1);
  }
  g.raw = std::move(raw);
  return g;
}

MatrixGrid pooled_grid(const char* name, const PooledHeadMatrices& pm, const PooledMatrix& m,
                       int64_t total_rows, int64_t total_cols) {
  MatrixGrid g;
  g.name = name;
  g.pooled = true;
  g.rows = pm.rows;
  g.cols = pm.cols;
  g.total_rows = total_rows;
  g.total_cols = total_cols;
  g.row_edges = pm.row_edges;
  g.col_edges = pm.col_edges;
  g.cell_min = m.min;
  g.cell_max = m.max;
  const size_t n = m.max.size();
  g.value.resize(n);
  g.cls.resize(n);
  for (size_t e = 0; e < n; ++e) {
    CellClass cls = CellClass::value;
    if (m.nan[e] > 0) {
      cls = CellClass::nan;
    } else if (m.pos_inf[e] > 0) {
      cls = CellClass::pos_inf;
    } else if (m.neg_inf[e] > 0) {
      cls = CellClass::neg_inf;
    } else if (m.finite[e] == 0) {
      cls = CellClass::masked;
    }
    g.cls[e] = cls;
    g.value[e] = cls != CellClass::value                      ? std::nanf("")
                 : std::fabs(m.max[e]) >= std::fabs(m.min[e]) ? m.max[e]
                                                              : m.min[e];
    g.counts.nan += m.nan[e];
    g.counts.pos_inf += m.pos_inf[e];
    g.counts.neg_inf += m.neg_inf[e];
    g.counts.masked += m.masked[e];
  }
  return g;
}

std::vector<float> row_norms(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> norms(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double e = x[static_cast<size_t>(i * cols + c)];
      sum += e * e;
    }
    norms[static_cast<size_t>(i)] = static_cast<float>(std::sqrt(sum));
  }
  return norms;
}

MatrixWindow resolve(const MatrixWindow& w, int64_t sq, int64_t sk) {
  MatrixWindow r;
  r.row_begin = std::clamp<int64_t>(w.row_begin, 0, sq - 1);
  r.row_end = w.row_end < 0 ? sq : std::clamp<int64_t>(w.row_end, r.row_begin + 1, sq);
  r.col_begin = std::clamp<int64_t>(w.col_begin, 0, sk - 1);
  r.col_end = w.col_end < 0 ? sk : std::clamp<int64_t>(w.col_end, r.col_begin + 1, sk);
  return r;
}

void score_grids(const HeadSlice& slice, const CpuAttnOptions& opt, const HeadRequest& req,
                 HeadResult& out) {
  const int64_t sq = slice.params.seqlen_q, sk = slice.params.seqlen_k;
  const MatrixWindow w = resolve(req.window, sq, sk);
  const int64_t rows = w.row_end - w.row_begin, cols = w.col_end - w.col_begin;
  const int64_t out_rows = std::max<int64_t>(1, req.out_rows);
  const int64_t out_cols = std::max<int64_t>(1, req.out_cols);
  MatrixGrid* grids[] = {&out.s, &out.p, &out.dp, &out.ds};
  if (rows <= out_rows && cols <= out_cols) {
    HeadMatrices hm = cpu_head_matrices(slice.params, opt, slice.inputs(), 0, 0, w);
    std::vector<float>* mats[] = {&hm.s, &hm.p, &hm.dp, &hm.ds};
    for (int k = 0; k < 4; ++k) {
      *grids[k] = full_grid(kScoreMatrices[k], std::move(*mats[k]), hm.masked, w.row_begin, rows,
                            w.col_begin, cols, sq, sk);
    }
    return;
  }
  const PooledHeadMatrices pm =
      cpu_pooled_matrices(slice.params, opt, slice.inputs(), 0, 0, std::min(rows, out_rows),
                          std::min(cols, out_cols), w);
  const PooledMatrix* mats[] = {&pm.s, &pm.p, &pm.dp, &pm.ds};
  for (int k = 0; k < 4; ++k) *grids[k] = pooled_grid(kScoreMatrices[k], pm, *mats[k], sq, sk);
}

}  // namespace

const MatrixGrid* HeadResult::grid(const std::string& name) const {
  const MatrixGrid* all[] = {&s, &p, &dp, &ds, &o, &dq};
  for (const MatrixGrid* g : all) {
    if (g->name == name) return g;
  }
  return nullptr;
}

Result<HeadResult> compute_head(const CaseData& data, const HeadRequest& request) {
  const auto started = std::chrono::steady_clock::now();
  const CaseDims& d = data.info.dims;
  if (request.batch < 0 || request.batch >= d.batch || request.head < 0 ||
      request.head >= d.heads) {
    return make_error(ErrorCode::invalid_argument,
                      data.info.path + ": (batch " + std::to_string(request.batch) + ", head " +
                          std::to_string(request.head) + ") is outside B=" +
                          std::to_string(d.batch) + " H=" + std::to_string(d.heads),
                      "pick a batch in [0, B) and a head in [0, H)");
  }
  Result<CaseInputs> inputs = make_case_inputs(data, request.settings);
  if (!inputs) return inputs.error();
  const HeadSlice slice = slice_head(*inputs, request.batch, request.head);
  CpuAttnOptions opt;
  opt.mode = request.mode;
  opt.threads = request.threads;

  HeadResult out;
  out.request = request;
  out.case_path = data.info.path;
  out.precision = slice.params.precision;
  out.scale = slice.params.scale;
  out.has_dout = inputs->has_dout;
  const int64_t sq = d.seqlen_q, sk = d.seqlen_k;
  out.seqlen_q = sq;
  out.seqlen_k = sk;
  out.head_dim = d.head_dim;
  out.head_dim_v = d.head_dim_v;
  score_grids(slice, opt, request, out);

  CpuAttnResult r = cpu_attention(slice.params, opt, slice.inputs());
  out.o_norm = row_norms(r.o, sq, d.head_dim_v);
  out.dq_norm = row_norms(r.dq, sq, d.head_dim);
  out.o = full_grid("O", std::move(r.o), {}, 0, sq, 0, d.head_dim_v, sq, d.head_dim_v);
  out.dq = full_grid("dQ", std::move(r.dq), {}, 0, sq, 0, d.head_dim, sq, d.head_dim);
  out.m = std::move(r.m);
  out.lse = std::move(r.lse);
  out.l = std::move(r.l);
  out.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return out;
}

}  // namespace attnscope
