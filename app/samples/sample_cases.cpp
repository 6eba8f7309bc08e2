// Builds the bundled sample cases from fixed seeds. Tensors are canonical BHSD; values are
// rounded once to the dtype the case is stored in.
#include "sample_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/reference/reference_attention.h"
#include "sample_random.h"

namespace attnscope {
namespace {

using Shape = std::vector<int64_t>;

int64_t product(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

CaseData new_case(const std::string& name, const std::string& description,
                  const std::string& run_dtype) {
  CaseData c;
  c.info.config.name = name;
  c.info.config.description = description;
  c.info.config.dtype = run_dtype;
  return c;
}

void put(CaseData& c, const std::string& tensor, DType dtype, const Shape& shape,
         const std::vector<double>& values) {
  c.tensors[tensor] = HostTensor::from_double(dtype, shape, values);
}

// Sets `value_sign * magnitude * (0.9 + 0.1 u)` in the given head dims of rows [row0, row1)
// of head `head` in a [B, H, S, D] buffer (massive-activation outliers; sign fixed per dim so
// that q and k outliers align).
void add_outliers(std::vector<double>& x, const Shape& shape, int64_t head, int64_t row0,
                  int64_t row1, const std::vector<int64_t>& dims, double magnitude,
                  SampleRandom& rng) {
  const int64_t H = shape[1], S = shape[2], D = shape[3];
  for (int64_t b = 0; b < shape[0]; ++b) {
    for (int64_t i = row0; i < row1; ++i) {
      for (size_t n = 0; n < dims.size(); ++n) {
        const double sign = n % 2 ? -1.0 : 1.0;
        x[((b * H + head) * S + i) * D + dims[n]] = sign * magnitude * (0.9 + 0.1 * rng.uniform());
      }
    }
  }
}

}  // namespace

SampleCase make_fp16_score_overflow() {
  const Shape shape = {1, 4, 128, 64};
  SampleRandom rng(101);
  std::vector<double> q = rng.normals(product(shape), 1.0);
  std::vector<double> k = rng.normals(product(shape), 1.0);
  const std::vector<int64_t> dims = {5, 17, 33, 50};
  add_outliers(q, shape, 3, 12, 41, dims, 576.0, rng);
  add_outliers(k, shape, 3, 0, 128, dims, 383.0, rng);
  CaseData c = new_case(
      "fp16 score overflow",
      "massive activations in head dims 5/17/33/50 of head 3 (|q| ~ 576, |k| ~ 383) give "
      "q.k up to 8.5e5 > 65504 in rows 12-40: inf in unfused fp16, finite in fused fp16 and bf16",
      "float16");
  put(c, "q", DType::f16, shape, q);
  put(c, "k", DType::f16, shape, k);
  put(c, "v", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "do", DType::f16, shape, rng.normals(product(shape), 1.0));
  return {"/fp16_score_overflow", std::move(c)};
}

SampleCase make_padding_mask_fp16() {
  const Shape shape = {2, 4, 96, 64};
  const int64_t S = shape[2];
  const int64_t valid_length[2] = {96, 70};
  SampleRandom rng(202);
  // bias [B, 1, Sq, Sk]: 0 where both query and key are real tokens, -1e9 elsewhere (the
  // "extended attention mask" of BERT-style code). Rows 70..95 of batch 1 are all -1e9.
  std::vector<double> bias(static_cast<size_t>(2 * S * S));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < S; ++i) {
      for (int64_t j = 0; j < S; ++j) {
        const bool real = i < valid_length[b] && j < valid_length[b];
        bias[(b * S + i) * S + j] = real ? 0.0 : -1e9;
      }
    }
  }
  CaseData c = new_case(
      "padding mask -1e9 in fp16",
      "additive padding bias of -1e9 (becomes -inf in fp16); batch 1 has 70 real tokens, so "
      "query rows 70-95 are fully padded: NaN in fp16, silent uniform attention in fp32",
      "float16");
  put(c, "q", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "k", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "v", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "do", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "bias", DType::f32, {2, 1, S, S}, bias);
  return {"/padding_mask_fp16", std::move(c)};
}

SampleCase make_exploding_grad() {
  const Shape shape = {1, 8, 256, 64};
  const int64_t per_head = shape[2] * shape[3];
  SampleRandom rng(303);
  std::vector<double> dout = rng.normals(product(shape), 0.01);
  // Head 5: stddev 7812.5 over 256 x 64 elements -> ||dO_head5|| ~ 7812.5 * 128 = 1e6.
  for (int64_t i = 0; i < per_head; ++i) dout[5 * per_head + i] *= 781250.0;
  CaseData c = new_case(
      "exploding upstream gradient",
      "||dO|| ~ 1e6 in head 5 (about 1.3 in the others): dQ/dK/dV explode in that head and "
      "clip_grad_norm_(max_norm=1) shrinks every head's gradient by ~1e-6",
      "bfloat16");
  put(c, "q", DType::bf16, shape, rng.normals(product(shape), 1.0));
  put(c, "k", DType::bf16, shape, rng.normals(product(shape), 1.0));
  put(c, "v", DType::bf16, shape, rng.normals(product(shape), 1.0));
  put(c, "do", DType::bf16, shape, dout);
  return {"/exploding_grad", std::move(c)};
}

SampleCase make_healthy() {
  const Shape shape = {2, 8, 1024, 64};
  SampleRandom rng(404);
  CaseData c = new_case("healthy causal B2 H8 S1024 D64",
                        "healthy causal self-attention in fp16 with recorded o and lse "
                        "(fp64 results rounded to the stored dtype)",
                        "float16");
  c.info.config.causal = true;
  put(c, "q", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "k", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "v", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "do", DType::f16, shape, rng.normals(product(shape), 0.01));

  AttnParams p;
  p.batch = shape[0];
  p.heads = p.kv_heads = shape[1];
  p.seqlen_q = p.seqlen_k = shape[2];
  p.head_dim = p.head_dim_v = shape[3];
  p.scale = 1.0 / std::sqrt(static_cast<double>(shape[3]));
  p.causal = true;
  const std::vector<double> q = c.q().to_double(), k = c.k().to_double(), v = c.v().to_double();
  const ReferenceTrace trace = reference_attention(p, q.data(), k.data(), v.data(), nullptr);
  put(c, "o", DType::f16, shape, trace.o);
  put(c, "lse", DType::f32, {shape[0], shape[1], shape[2]}, trace.lse);
  return {"/healthy_b2_h8_s1024", std::move(c)};
}

namespace {

// Rescales x[begin, end) so that it has cosine `cosine` with its original values and the same
// norm: x' = ||x|| (cosine u + sqrt(1 - cosine^2) w), u = x / ||x||, w a random unit vector
// orthogonal to u.
void blend_to_cosine(std::vector<double>& x, size_t begin, size_t end, double cosine,
                     SampleRandom& rng) {
  double norm = 0;
  for (size_t e = begin; e < end; ++e) norm += x[e] * x[e];
  norm = std::sqrt(norm);
  std::vector<double> w(end - begin);
  double along = 0, w_norm = 0;
  for (size_t e = begin; e < end; ++e) {
    w[e - begin] = rng.normal();
    along += w[e - begin] * x[e] / norm;
  }
  for (size_t e = begin; e < end; ++e) {
    w[e - begin] -= along * x[e] / norm;
    w_norm += w[e - begin] * w[e - begin];
  }
  w_norm = std::sqrt(w_norm);
  const double sine = std::sqrt(1 - cosine * cosine);
  for (size_t e = begin; e < end; ++e) {
    x[e] = norm * (cosine * x[e] / norm + sine * w[e - begin] / w_norm);
  }
}

}  // namespace

SampleCase make_recorded_mismatch() {
  const Shape shape = {1, 4, 64, 32};
  const size_t per_head = 64 * 32;
  SampleRandom rng(505);
  CaseData c = new_case(
      "recorded gradients disagree",
      "finite but wrong recorded gradients (fp64 results rounded to fp16, then corrupted): dq "
      "head-dim columns 3, 17, 29 of head 1 replaced by noise, dk of head 2 scaled 5x, dv of "
      "head 3 blended to cosine -0.1; o and lse are right",
      "float16");
  put(c, "q", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "k", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "v", DType::f16, shape, rng.normals(product(shape), 1.0));
  put(c, "do", DType::f16, shape, rng.normals(product(shape), 1.0));

  AttnParams p;
  p.heads = p.kv_heads = shape[1];
  p.seqlen_q = p.seqlen_k = shape[2];
  p.head_dim = p.head_dim_v = shape[3];
  p.scale = 1.0 / std::sqrt(static_cast<double>(shape[3]));
  const std::vector<double> q = c.q().to_double(), k = c.k().to_double(), v = c.v().to_double();
  const std::vector<double> dout = c.tensors.at("do").to_double();
  ReferenceTrace t = reference_attention(p, q.data(), k.data(), v.data(), dout.data());
  for (size_t i = 0; i < 64; ++i) {
    for (size_t col : {3, 17, 29}) t.dq[per_head + i * 32 + col] = 0.5 * rng.normal();
  }
  for (size_t e = 2 * per_head; e < 3 * per_head; ++e) t.dk[e] *= 5.0;
  blend_to_cosine(t.dv, 3 * per_head, 4 * per_head, -0.1, rng);
  put(c, "o", DType::f16, shape, t.o);
  put(c, "lse", DType::f32, {shape[0], shape[1], shape[2]}, t.lse);
  put(c, "dq", DType::f16, shape, t.dq);
  put(c, "dk", DType::f16, shape, t.dk);
  put(c, "dv", DType::f16, shape, t.dv);
  return {"/recorded_mismatch", std::move(c)};
}

std::vector<SampleCase> make_training_series() {
  const Shape shape = {1, 2, 128, 64};
  const std::vector<int64_t> dims = {3, 21, 40, 58};
  std::vector<SampleCase> series;
  for (int64_t step = 0; step < 8; ++step) {
    for (int64_t layer = 0; layer < 4; ++layer) {
      SampleRandom rng(static_cast<uint64_t>(1000 + 10 * step + layer));
      // Outlier magnitude grows 1.7x per step: 4 a^2 passes 65504 from step 5 on.
      const double magnitude = 10.0 * std::pow(1.7, static_cast<double>(step)) *
                               (1.0 + 0.1 * static_cast<double>(layer));
      std::vector<double> q = rng.normals(product(shape), 1.0);
      std::vector<double> k = rng.normals(product(shape), 1.0);
      for (int64_t h = 0; h < shape[1]; ++h) {
        add_outliers(q, shape, h, 0, shape[2], dims, magnitude, rng);
        add_outliers(k, shape, h, 0, shape[2], dims, magnitude, rng);
      }
      char path[64], name[64];
      std::snprintf(path, sizeof path, "/train/step_%03lld/layer_%02lld",
                    static_cast<long long>(step), static_cast<long long>(layer));
      std::snprintf(name, sizeof name, "step %lld layer %lld", static_cast<long long>(step),
                    static_cast<long long>(layer));
      CaseData c = new_case(name,
                            "training series: outlier activations grow 1.7x per step until "
                            "q.k exceeds the fp16 range from step 5 on",
                            "float16");
      c.info.config.causal = true;
      c.info.config.step = step;
      c.info.config.layer = layer;
      put(c, "q", DType::f16, shape, q);
      put(c, "k", DType::f16, shape, k);
      put(c, "v", DType::f16, shape, rng.normals(product(shape), 1.0));
      put(c, "do", DType::f16, shape, rng.normals(product(shape), 0.1));
      series.push_back({path, std::move(c)});
    }
  }
  return series;
}

}  // namespace attnscope

namespace attnscope {

namespace {

// Rows [begin, begin + length) of every head of a canonical [1, H, T, D] buffer, as [1, H,
// length, D]; and back.
std::vector<double> cut_rows(const std::vector<double>& x, int64_t heads, int64_t tokens,
                             int64_t dim, int64_t begin, int64_t length) {
  std::vector<double> out;
  for (int64_t h = 0; h < heads; ++h) {
    const auto first = x.begin() + (h * tokens + begin) * dim;
    out.insert(out.end(), first, first + length * dim);
  }
  return out;
}

void paste_rows(std::vector<double>& x, const std::vector<double>& rows, int64_t heads,
                int64_t tokens, int64_t dim, int64_t begin, int64_t length) {
  for (int64_t h = 0; h < heads; ++h) {
    std::copy(rows.begin() + h * length * dim, rows.begin() + (h + 1) * length * dim,
              x.begin() + (h * tokens + begin) * dim);
  }
}

}  // namespace

std::vector<SampleCase> make_packed_sequences() {
  const std::vector<int64_t> lengths = {32, 20, 48, 12};
  const int64_t T = 112, H = 4, Hk = 2, D = 32;
  std::vector<double> starts = {0};
  for (int64_t n : lengths) starts.push_back(starts.back() + static_cast<double>(n));
  SampleRandom rng(707);
  auto packed_case = [&](const std::string& name, const std::string& description) {
    CaseData c = new_case(name, description, "float16");
    c.info.config.layout = Layout::thd;
    put(c, "q", DType::f16, {1, H, T, D}, rng.normals(H * T * D, 1.0));
    put(c, "k", DType::f16, {1, Hk, T, D}, rng.normals(Hk * T * D, 1.0));
    put(c, "v", DType::f16, {1, Hk, T, D}, rng.normals(Hk * T * D, 1.0));
    put(c, "do", DType::f16, {1, H, T, D}, rng.normals(H * T * D, 0.01));
    c.tensors["cu_seqlens_q"] =
        HostTensor::from_double(DType::i32, {static_cast<int64_t>(starts.size())}, starts);
    return c;
  };

  // flash_attn_varlen_func over 4 documents; a NaN in k at token 60 (document 2, row 8).
  CaseData varlen = packed_case(
      "varlen fp16, NaN in one document's k",
      "4 documents (32, 20, 48, 12 tokens) packed as flash_attn_varlen_func takes them (THD, "
      "cu_seqlens), causal per document; one NaN in k at token 60 poisons only document 2");
  varlen.info.config.causal = true;
  varlen.info.config.causal_align = CausalAlign::bottom_right;
  varlen.info.config.run.backend = "flash_attn";
  std::vector<double> k = varlen.k().to_double();
  k[(1 * T + 60) * D + 5] = std::nan("");
  put(varlen, "k", DType::f16, {1, Hk, T, D}, k);
  const std::vector<double> q = varlen.q().to_double(), v = varlen.v().to_double();
  std::vector<double> o(static_cast<size_t>(H * T * D)), lse(static_cast<size_t>(H * T));
  for (size_t s = 0; s + 1 < starts.size(); ++s) {
    const auto begin = static_cast<int64_t>(starts[s]), length = lengths[s];
    AttnParams p;
    p.batch = 1;
    p.heads = H;
    p.kv_heads = Hk;
    p.seqlen_q = p.seqlen_k = length;
    p.head_dim = p.head_dim_v = D;
    p.scale = 1.0 / std::sqrt(static_cast<double>(D));
    p.causal = true;
    p.causal_align = CausalAlign::bottom_right;
    const std::vector<double> qs = cut_rows(q, H, T, D, begin, length),
                              ks = cut_rows(k, Hk, T, D, begin, length),
                              vs = cut_rows(v, Hk, T, D, begin, length);
    const ReferenceTrace trace = reference_attention(p, qs.data(), ks.data(), vs.data(), nullptr);
    paste_rows(o, trace.o, H, T, D, begin, length);
    paste_rows(lse, trace.lse, H, T, 1, begin, length);
  }
  put(varlen, "o", DType::f16, {1, H, T, D}, o);
  put(varlen, "lse", DType::f32, {1, H, T}, lse);

  // The same documents packed for SDPA with a plain causal [T, T] mask: documents see the
  // ones before them (the mask was not reset at document boundaries).
  CaseData leaky =
      packed_case("SDPA packing, causal mask not reset per document",
                  "4 documents packed into one row for SDPA with a causal [T, T] mask that is not "
                  "block-diagonal: every document after the first attends the documents before it");
  std::vector<double> mask(static_cast<size_t>(T * T));
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = 0; j <= i; ++j) mask[static_cast<size_t>(i * T + j)] = 1;
  }
  put(leaky, "mask", DType::boolean, {1, 1, T, T}, mask);
  std::vector<SampleCase> out;
  out.push_back({"/packed_varlen_nan_k", std::move(varlen)});
  out.push_back({"/packed_sdpa_causal_mask", std::move(leaky)});
  return out;
}

}  // namespace attnscope
