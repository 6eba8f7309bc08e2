// Vectorised fp32 tile math, compiled by Highway once per instruction set (foreach_target:
// AVX-512, AVX2 + FMA + F16C, SSE4, and the portable path built for the x86-64 baseline) and
// dispatched at run time to the one cpu_isa.h chose. Every function sums in a fixed order
// for a given instruction set, so results never depend on the thread count; across
// instruction sets lane counts and FMA contraction differ (within the accuracy rule).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/tile_math.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"
#include "kernels/cpu/tile_vec-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attn_check.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/precision.h"

HWY_BEFORE_NAMESPACE();
namespace attnscope::cpu {
namespace HWY_NAMESPACE {

HWY_INLINE V Splat(float x) {
  return hn::Set(D(), x);
}

// Lanes summed in lane order 0, 1, ...
HWY_INLINE float SumLanes(V v) {
  float lanes[kLanes];
  hn::StoreU(v, D(), lanes);
  float s = 0;
  for (int64_t x = 0; x < kLanes; ++x) s += lanes[x];
  return s;
}

// Largest (kLargest) or smallest lane of a NaN-free v, -inf / +inf lanes included. (Highway's
// EMU128 MaxOfLanes / MinOfLanes start from the lowest / largest finite value, which turns an
// all -inf v into -FLT_MAX; that set reduces lane by lane.)
template <bool kLargest>
HWY_INLINE float ExtremeLane(V v) {
#if HWY_TARGET == HWY_EMU128
  float lanes[kLanes];
  hn::StoreU(v, D(), lanes);
  float best = lanes[0];
  for (int64_t x = 1; x < kLanes; ++x) {
    best = kLargest ? std::max(best, lanes[x]) : std::min(best, lanes[x]);
  }
  return best;
#else
  return hn::GetLane(kLargest ? hn::MaxOfLanes(D(), v) : hn::MinOfLanes(D(), v));
#endif
}

// exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln2 / 2, exp(r) by the Cephes expf
// polynomial. 2^n is built in the exponent bits as 2^(n-1) * 2 so n = 128 still works. NaN
// stays NaN (the clamps below keep it), x < -86.5 gives 0. DF: any fp32 vector tag.
template <class DF>
HWY_INLINE hn::Vec<DF> Exp(DF d, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  const auto c = [d](float v) { return hn::Set(d, v); };
  const auto lo = c(-87.0f), hi = c(88.8f), magic = c(12582912.0f);  // 1.5 * 2^23
#if HWY_TARGET <= HWY_SSE4
  // x86's maxps / minps return their second operand when either is NaN: x's NaN stays.
  const auto xc = hn::Min(hi, hn::Max(lo, x));
#else
  auto xc = hn::IfThenElse(x < lo, lo, x);
  xc = hn::IfThenElse(xc > hi, hi, xc);
#endif
  const auto t = hn::MulAdd(xc, c(1.44269504088896341f), magic);  // round(x log2 e), low bits
  const auto n = hn::Sub(t, magic);
  auto r = hn::NegMulAdd(n, c(0.693359375f), xc);
  r = hn::NegMulAdd(n, c(-2.12194440e-4f), r);
  auto p = hn::MulAdd(r, c(1.9875691500e-4f), c(1.3981999507e-3f));
  p = hn::MulAdd(p, r, c(8.3334519073e-3f));
  p = hn::MulAdd(p, r, c(4.1665795894e-2f));
  p = hn::MulAdd(p, r, c(1.6666665459e-1f));
  p = hn::MulAdd(p, r, c(5.0000001201e-1f));
  p = hn::Add(hn::MulAdd(hn::Mul(p, r), r, r), c(1.0f));
  const auto bits = hn::ShiftLeft<23>(
      hn::Add(hn::Sub(hn::BitCast(du, t), hn::Set(du, 0x4B400000u)), hn::Set(du, 126u)));
  const auto y = hn::Mul(hn::Mul(p, hn::BitCast(d, bits)), c(2.0f));
  return hn::IfThenElse(x < c(-86.5f), hn::Zero(d), y);
}

// Row sums in one order on every instruction set: element x goes to virtual lane x mod 8,
// each lane sums its elements in order, then lanes 0..7 are added in order and the n mod 8
// last elements one by one. That is the order of LibTorch's portable 8-float reductions
// (softmax sums, .sum()), which the unfused emulation reproduces. Its vectors are at most 8
// lanes wide: one holds all 8 virtual lanes on AVX2 / AVX-512, two on SSE4, eight on SCALAR.
using D8 = hn::CappedTag<float, 8>;
constexpr int64_t kVirtualLanes = 8;
constexpr int64_t kLanes8 = HWY_MIN(HWY_LANES(float), kVirtualLanes);
constexpr int kVectors8 = static_cast<int>(kVirtualLanes / kLanes8);
static_assert(kVectors8 * kLanes8 == kVirtualLanes, "whole vectors of virtual lanes");

struct Lanes8 {
  hn::Vec<D8> v[kVectors8];
  Lanes8() {
    for (auto& x : v) x = hn::Zero(D8());
  }
  // Adds the lanes of a full register holding elements offset.. of a block of
  // max(kLanes, 8): to virtual lanes 0..7 in element order (on AVX-512 the lower half, then the
  // upper half).
  void add(hn::Vec<D> e, int64_t offset) {
#if HWY_TARGET <= HWY_AVX3  // 16 lanes: two halves of 8
    (void)offset;
    v[0] = hn::Add(v[0], hn::LowerHalf(D8(), e));
    v[0] = hn::Add(v[0], hn::UpperHalf(D8(), e));
#else
    v[offset / kLanes] = hn::Add(v[offset / kLanes], e);
#endif
  }
  // Lanes 0..7 added in order.
  float sum() const {
    float lanes[kVirtualLanes];
    for (int i = 0; i < kVectors8; ++i) hn::StoreU(v[i], D8(), lanes + i * kLanes8);
    float s = 0;
    for (float x : lanes) s += x;
    return s;
  }
};

// Round to bfloat16 as float_to_bf16_bits: nearest-even on the top 16 bits, NaN made quiet.
// DF: any fp32 vector tag.
template <class DF>
HWY_INLINE hn::Vec<DF> RoundBf16(DF d, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto u = hn::BitCast(du, x);
  const auto top = hn::Set(du, 0xffff0000u);
  const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::And(hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), odd), top);
  const auto quiet_nan = hn::Or(hn::And(u, top), hn::Set(du, 0x00400000u));
  // |x| bits above those of inf: NaN (compared as int32: both sides are below 2^31).
  const auto nan =
      hn::BitCast(di, hn::And(u, hn::Set(du, kMagnitudeMask))) > hn::Set(di, 0x7f800000);
  return hn::BitCast(d, hn::IfThenElse(hn::RebindMask(du, nan), quiet_nan, rounded));
}

// F16C converts to nearest even (MXCSR's default), overflows to inf, keeps subnormals and
// quiets NaN exactly as float_to_half_bits. Highway's emulation on older targets truncates,
// so those round f16 lane by lane.
constexpr bool kVectorF16 = HWY_TARGET <= HWY_AVX2;

// round_to(kP, x) lane by lane (kP f32, bf16, or f16 where kVectorF16).
template <Precision kP, class DF>
HWY_INLINE hn::Vec<DF> Rounded(DF d, hn::Vec<DF> x) {
  if constexpr (kP == Precision::bf16) x = RoundBf16(d, x);
#if HWY_TARGET <= HWY_AVX2
  if constexpr (kP == Precision::f16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    x = hn::PromoteTo(d, hn::DemoteTo(dh, x));
  }
#else
  (void)d;
#endif
  return x;
}

// The magnitude bits of x as unsigned integers (precision.h: finite iff <= kMaxFiniteBits).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> MagnitudeBits(DF d, hn::Vec<DF> x) {
  (void)d;
  const hn::RebindToUnsigned<DF> du;
  return hn::And(hn::BitCast(du, x), hn::Set(du, kMagnitudeMask));
}

template <Precision kP>
struct RoundTag {
  static constexpr Precision value = kP;
};

// Returns body(RoundTag<P>()), P the precision Rounded rounds to in registers here:
// `precision`, or f32 where it cannot (f16 before AVX2: the body rounds those lanes one by
// one). The precision is fixed per call, so the body's loops carry no branch on it.
template <class Body>
HWY_INLINE auto WithVectorRounding(Precision precision, const Body& body) {
  if (precision == Precision::bf16) return body(RoundTag<Precision::bf16>());
  if (precision == Precision::f16 && kVectorF16) return body(RoundTag<Precision::f16>());
  return body(RoundTag<Precision::f32>());
}

float ExpF32(float x) {
  return hn::GetLane(Exp(D(), Splat(x)));
}

// Row sums in the Lanes8 order: the sum of p[0:n] (virtual lanes over blocks of max(kLanes, 8),
// a last block of 8, the lanes in order, then the tail one by one), each p[x] stored back rounded
// to `precision` on the way.
float SumRounding(float* p, int64_t n, Precision precision) {
  return WithVectorRounding(precision, [&](auto tag) HWY_ATTR {
    constexpr Precision kInVector = decltype(tag)::value;
    const D d;
    const D8 d8;
    Lanes8 acc;
    int64_t x = 0;
    constexpr int64_t kBlock = HWY_MAX(kLanes, kVirtualLanes);
    for (; x + kBlock <= n; x += kBlock) {
      for (int64_t at = x; at < x + kBlock; at += kLanes) {
        const V e = hn::LoadU(d, p + at);
        if constexpr (kInVector != Precision::f32) hn::StoreU(Rounded<kInVector>(d, e), d, p + at);
        acc.add(e, at - x);
      }
    }
    for (; x + kVirtualLanes <= n; x += kVirtualLanes) {
      const auto e = hn::LoadU(d8, p + x);
      if constexpr (kInVector != Precision::f32) hn::StoreU(Rounded<kInVector>(d8, e), d8, p + x);
      acc.v[0] = hn::Add(acc.v[0], e);
    }
    if (kInVector != precision) {
      for (int64_t i = 0; i < x; ++i) p[i] = round_to(precision, p[i]);
    }
    float sum = acc.sum();
    for (; x < n; ++x) {
      sum += p[x];
      p[x] = round_to(precision, p[x]);
    }
    return sum;
  });
}

void ExpDifferences(const float* a, const float* b, float* out, int64_t n) {
  const D d;
  int64_t x = 0;
  for (; x + kLanes <= n; x += kLanes) {
    hn::StoreU(Exp(d, hn::Sub(hn::LoadU(d, a + x), hn::LoadU(d, b + x))), d, out + x);
  }
  for (; x < n; ++x) out[x] = ExpF32(a[x] - b[x]);
}

// Running maxima over a block of x - shift_r (subtraction rounds monotonically, so that is the
// largest row max minus its shift) and of the magnitude bits of x, which for finite values order
// as the magnitudes do. Four accumulators of each, register k of a row to k mod 4, so the
// maxima's latency overlaps; two reductions at the end, none per row.
struct BlockMaxAcc {
  static constexpr int kAcc = 4;
  V shifted[kAcc];
  hn::Vec<DU> largest[kAcc];
  float tail_shifted = -std::numeric_limits<float>::infinity();
  uint32_t tail_largest = 0;

  BlockMaxAcc() {
    for (int a = 0; a < kAcc; ++a) {
      shifted[a] = Splat(-std::numeric_limits<float>::infinity());
      largest[a] = hn::Zero(DU());
    }
  }
  HWY_INLINE void add(int a, V x, V x_minus_shift) {
    shifted[a] = hn::Max(shifted[a], x_minus_shift);
    largest[a] = hn::Max(largest[a], MagnitudeBits(D(), x));
  }
  void add_tail(float x, float x_minus_shift) {
    tail_shifted = std::max(tail_shifted, x_minus_shift);
    tail_largest = std::max(tail_largest, float_bits(x) & kMagnitudeMask);
  }
  // finite_block_max's outputs and answer.
  bool finish(float* max_shifted, float* max_abs) {
    for (int a = 1; a < kAcc; ++a) {
      shifted[0] = hn::Max(shifted[0], shifted[a]);
      largest[0] = hn::Max(largest[0], largest[a]);
    }
    const uint32_t bits = std::max(hn::GetLane(hn::MaxOfLanes(DU(), largest[0])), tail_largest);
    if (bits > kMaxFiniteBits) return false;
    *max_abs = bits_float(bits);
    *max_shifted = std::max(ExtremeLane<true>(shifted[0]), tail_shifted);
    return true;
  }
};

// p = exp(s - base_r) * factor_r; with kMax also the block maxima of s against base
// (BlockMaxAcc), from the differences the exps take.
template <bool kMax>
bool ExpRows(int64_t rows, int64_t cols, int64_t ld, const float* s, const float* base,
             const float* factor, float* p, float* max_shifted, float* max_abs) {
  const D d;
  BlockMaxAcc acc;
  for (int64_t r = 0; r < rows; ++r) {
    const float* s_r = s + r * ld;
    float* p_r = p + r * ld;
    const V vb = Splat(base[r]), vf = Splat(factor[r]);
    int64_t x = 0;
    // Four registers per step: their exps interleave, so the dependency chains overlap.
    for (; x + 4 * kLanes <= cols; x += 4 * kLanes) {
      V e[4];
      for (int i = 0; i < 4; ++i) {
        const V v = hn::LoadU(d, s_r + x + i * kLanes), arg = hn::Sub(v, vb);
        if constexpr (kMax) acc.add(i, v, arg);
        e[i] = Exp(d, arg);
      }
      for (int i = 0; i < 4; ++i) hn::StoreU(hn::Mul(e[i], vf), d, p_r + x + i * kLanes);
    }
    for (; x + kLanes <= cols; x += kLanes) {
      const V v = hn::LoadU(d, s_r + x), arg = hn::Sub(v, vb);
      if constexpr (kMax) acc.add(0, v, arg);
      hn::StoreU(hn::Mul(Exp(d, arg), vf), d, p_r + x);
    }
    for (; x < cols; ++x) {
      const float arg = s_r[x] - base[r];
      if constexpr (kMax) acc.add_tail(s_r[x], arg);
      p_r[x] = ExpF32(arg) * factor[r];
    }
  }
  return kMax && acc.finish(max_shifted, max_abs);
}

void ExpShiftedScaledRows(int64_t rows, int64_t cols, int64_t ld, const float* s, const float* base,
                          const float* factor, float* p) {
  ExpRows<false>(rows, cols, ld, s, base, factor, p, nullptr, nullptr);
}

bool ExpShiftedScaledRowsMax(int64_t rows, int64_t cols, int64_t ld, const float* s,
                             const float* base, const float* factor, float* p, float* max_shifted,
                             float* max_abs) {
  return ExpRows<true>(rows, cols, ld, s, base, factor, p, max_shifted, max_abs);
}

// The exps first (ExpShiftedScaledRows, times 1 is exact), then their sum (SumRounding).
float ExpShiftedSum(const float* s, float base, float* p, int64_t n) {
  const float one = 1.0f;
  ExpShiftedScaledRows(1, n, n, s, &base, &one, p);
  return SumRounding(p, n, Precision::f32);
}

float MaxPropagatingNan(const float* x, int64_t n) {
  // A lane takes v when v is larger or NaN; once NaN it stays NaN (NaN > v is false).
  const D d;
  V m = Splat(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const V v = hn::LoadU(d, x + i);
    m = hn::IfThenElse(hn::Or(v > m, hn::IsNaN(v)), v, m);
  }
  float best = hn::AllFalse(d, hn::IsNaN(m)) ? ExtremeLane<true>(m)
                                             : std::numeric_limits<float>::quiet_NaN();
  for (; i < n; ++i) best = max_propagating_nan(best, x[i]);
  return best;
}

float DotF32(const float* a, const float* b, int64_t n) {
  const D8 d8;
  Lanes8 acc;
  int64_t x = 0;
  for (; x + kVirtualLanes <= n; x += kVirtualLanes) {
    for (int i = 0; i < kVectors8; ++i) {
      const int64_t at = x + i * kLanes8;
      acc.v[i] = hn::MulAdd(hn::LoadU(d8, a + at), hn::LoadU(d8, b + at), acc.v[i]);
    }
  }
  float sum = acc.sum();
  for (; x < n; ++x) sum = MulAddLane(a[x], b[x], sum);
  return sum;
}

double SumSquares(const float* x, int64_t n) {
  using DD = hn::CappedTag<double, kVirtualLanes>;
  constexpr int64_t kLanesD = HWY_MIN(HWY_LANES(double), kVirtualLanes);
  constexpr int kVectorsD = static_cast<int>(kVirtualLanes / kLanesD);
  const DD dd;
  const hn::Rebind<float, DD> df;
  hn::Vec<DD> acc[kVectorsD];
  for (auto& a : acc) a = hn::Zero(dd);
  int64_t i = 0;
  for (; i + kVirtualLanes <= n; i += kVirtualLanes) {
    for (int v = 0; v < kVectorsD; ++v) {
      const auto e = hn::PromoteTo(dd, hn::LoadU(df, x + i + v * kLanesD));
      acc[v] = hn::MulAdd(e, e, acc[v]);
    }
  }
  double lanes[kVirtualLanes];
  for (int v = 0; v < kVectorsD; ++v) hn::StoreU(acc[v], dd, lanes + v * kLanesD);
  double sum = 0;
  for (double lane : lanes) sum += lane;
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// Rows r .. r + kRows - 1 of DotRowsF32InOrder (a constant count, so that the sums live in
// registers).
template <int64_t kRows>
HWY_INLINE void DotRowsGroup(int64_t r, int64_t n, const float* a, const float* b, float* out) {
  const hn::CappedTag<float, 1> d1;
  hn::Vec<decltype(d1)> sum[kRows];
  for (auto& v : sum) v = hn::Zero(d1);
  for (int64_t x = 0; x < n; ++x) {
    for (int64_t i = 0; i < kRows; ++i) {
      const int64_t at = (r + i) * n + x;
      sum[i] = hn::MulAdd(hn::LoadU(d1, a + at), hn::LoadU(d1, b + at), sum[i]);
    }
  }
  for (int64_t i = 0; i < kRows; ++i) out[r + i] = hn::GetLane(sum[i]);
}

// Each row's sum runs in order, as GemmTile sums one element of C (MulAddLane's rounding, in
// one-lane vectors so that the sums stay in registers); kDotRows rows at a time, so that their
// FMA chains overlap.
void DotRowsF32InOrder(int64_t rows, int64_t n, const float* a, const float* b, float* out) {
  constexpr int64_t kDotRows = 8;
  int64_t r = 0;
  for (; r + kDotRows <= rows; r += kDotRows) DotRowsGroup<kDotRows>(r, n, a, b, out);
  for (; r < rows; ++r) DotRowsGroup<1>(r, n, a, b, out);
}

void FillRows(int64_t rows, int64_t cols, int64_t ld, float value, float* dst) {
  const D d;
  const V v = Splat(value);
  for (int64_t r = 0; r < rows; ++r) {
    float* dst_r = dst + r * ld;
    int64_t x = 0;
    for (; x + kLanes <= cols; x += kLanes) hn::StoreU(v, d, dst_r + x);
    for (; x < cols; ++x) dst_r[x] = value;
  }
}

void ScaleInPlace(float* x, float alpha, int64_t n) {
  const D d;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    hn::StoreU(hn::Mul(hn::LoadU(d, x + i), Splat(alpha)), d, x + i);
  for (; i < n; ++i) x[i] *= alpha;
}

void RoundCopy(Precision precision, const float* src, float* dst, int64_t n) {
  WithVectorRounding(precision, [&](auto tag) HWY_ATTR {
    constexpr Precision kInVector = decltype(tag)::value;
    const D d;
    int64_t i = 0;
    if (kInVector == precision) {
      for (; i + kLanes <= n; i += kLanes) {
        hn::StoreU(Rounded<kInVector>(d, hn::LoadU(d, src + i)), d, dst + i);
      }
    }
    for (; i < n; ++i) dst[i] = round_to(precision, src[i]);
  });
}

// Per row, the largest magnitude bits (as LargestMagnitude); over all rows, the OR of the bits
// that rounding flips. One pass over the rows.
bool RowMaxima(Precision precision, const float* x, int64_t rows, int64_t dim, float* row_max) {
  return WithVectorRounding(precision, [&](auto tag) HWY_ATTR {
    constexpr Precision kInVector = decltype(tag)::value;
    const D d;
    const DU du;
    auto changed = hn::Zero(du);
    bool same = true;
    for (int64_t r = 0; r < rows; ++r) {
      const float* x_r = x + r * dim;
      auto largest = hn::Zero(du);
      int64_t i = 0;
      for (; i + kLanes <= dim; i += kLanes) {
        const V v = hn::LoadU(d, x_r + i);
        largest = hn::Max(largest, MagnitudeBits(d, v));
        if constexpr (kInVector != Precision::f32) {
          changed = hn::Or(changed,
                           hn::Xor(hn::BitCast(du, Rounded<kInVector>(d, v)), hn::BitCast(du, v)));
        }
      }
      // Entries past the vectors, and every entry where this target rounds one by one.
      for (int64_t t = kInVector == precision ? i : 0; same && t < dim; ++t) {
        same = float_bits(round_to(precision, x_r[t])) == float_bits(x_r[t]);
      }
      uint32_t bits = hn::GetLane(hn::MaxOfLanes(du, largest));
      for (; i < dim; ++i) bits = std::max(bits, float_bits(x_r[i]) & kMagnitudeMask);
      row_max[r] = bits_float(bits);
    }
    return same && hn::AllTrue(du, hn::Eq(changed, hn::Zero(du)));
  });
}

void RoundRows(Precision precision, int64_t rows, int64_t cols, int64_t ld, const float* src,
               float* dst) {
  if (cols == ld) {  // one contiguous block
    RoundCopy(precision, src, dst, rows * cols);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) RoundCopy(precision, src + r * ld, dst + r * ld, cols);
}

float SoftmaxGradRows(int64_t rows, int64_t cols, int64_t ld, const float* p, const float* dp,
                      const float* d, const float* gf, Precision precision, float* ds) {
  return WithVectorRounding(precision, [&](auto tag) HWY_ATTR {
    constexpr Precision kInVector = decltype(tag)::value;
    const D df;
    const DU du;
    // The largest magnitude bits of dP and of the stored dS.
    auto largest_dp = hn::Zero(du), largest_ds = hn::Zero(du);
    uint32_t tail_dp = 0, tail_ds = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = r * ld;
      const V vd = Splat(d[r]);
      int64_t c = 0;
      for (; c + kLanes <= cols; c += kLanes) {
        const V dpv = hn::LoadU(df, dp + at + c);
        const V g =
            Rounded<kInVector>(df, hn::Mul(hn::Mul(hn::LoadU(df, p + at + c), hn::Sub(dpv, vd)),
                                           hn::LoadU(df, gf + at + c)));
        hn::StoreU(g, df, ds + at + c);
        largest_dp = hn::Max(largest_dp, MagnitudeBits(df, dpv));
        largest_ds = hn::Max(largest_ds, MagnitudeBits(df, g));
      }
      // Entries past the vectors, and every dS where this target rounds them one by one.
      const int64_t scalar = kInVector == precision ? c : 0;
      for (; c < cols; ++c) ds[at + c] = p[at + c] * (dp[at + c] - d[r]) * gf[at + c];
      for (c = scalar; c < cols; ++c) {
        ds[at + c] = round_to(precision, ds[at + c]);
        tail_dp = std::max(tail_dp, float_bits(dp[at + c]) & kMagnitudeMask);
        tail_ds = std::max(tail_ds, float_bits(ds[at + c]) & kMagnitudeMask);
      }
    }
    const uint32_t dp_bits = std::max(hn::GetLane(hn::MaxOfLanes(du, largest_dp)), tail_dp);
    const uint32_t ds_bits = std::max(hn::GetLane(hn::MaxOfLanes(du, largest_ds)), tail_ds);
    return std::max(dp_bits, ds_bits) <= kMaxFiniteBits ? bits_float(ds_bits)
                                                        : std::numeric_limits<float>::infinity();
  });
}

void OnlineSoftmaxRows(int64_t rows, int64_t cols, int64_t ld, const float* s, float* p, float* m,
                       float* l, float* acc, int64_t dim_v, Precision precision, BlockMax* s_max) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // Each row's base (m_new, or 0 while nothing is visible), then every alpha = exp(m - base)
  // in one vector pass.
  // base zeroed: GCC cannot see that ExpDifferences reads only its first `rows` entries.
  float m_new[kTileRows], base[kTileRows] = {}, alpha[kTileRows];
  for (int64_t r = 0; r < rows; ++r) {
    m_new[r] = max_propagating_nan(m[r], MaxPropagatingNan(s + r * ld, cols));
    base[r] = m_new[r] == -kInf ? 0.0f : m_new[r];
  }
  ExpDifferences(m, base, alpha, rows);
  // The exps of every row first (independent vectors, so their latencies overlap; times 1 is
  // exact), then each row's sum with P rounded on the way: ExpShiftedSum's bits.
  float ones[kTileRows];
  std::fill(ones, ones + kTileRows, 1.0f);
  if (s_max != nullptr) {
    s_max->finite =
        ExpRows<true>(rows, cols, ld, s, base, ones, p, &s_max->max_shifted, &s_max->max_abs);
  } else {
    ExpRows<false>(rows, cols, ld, s, base, ones, p, nullptr, nullptr);
  }
  for (int64_t r = 0; r < rows; ++r) {
    // alpha l + sum in one FMA where the set has it, as the compiler contracted it before it
    // was spelled out (contraction is the compiler's choice: the bits must not be).
    l[r] = MulAddLane(alpha[r], l[r], SumRounding(p + r * ld, cols, precision));
    if (alpha[r] != 1.0f) ScaleInPlace(acc + r * dim_v, alpha[r], dim_v);
    m[r] = m_new[r];
  }
}

// Magnitude bits (as unsigned integers) order as the magnitudes do, with inf above every finite
// value and NaN above inf: the largest bits over x are the answer, two integer operations per
// register. Four accumulators keep the max's latency off the loads.
float LargestMagnitude(const float* x, int64_t n) {
  const D d;
  const DU du;
  constexpr int kAcc = 4;
  hn::Vec<DU> acc[kAcc];
  for (auto& a : acc) a = hn::Zero(du);
  int64_t i = 0;
  for (; i + kAcc * kLanes <= n; i += kAcc * kLanes) {
    for (int a = 0; a < kAcc; ++a) {
      acc[a] = hn::Max(acc[a], MagnitudeBits(d, hn::LoadU(d, x + i + a * kLanes)));
    }
  }
  for (; i + kLanes <= n; i += kLanes)
    acc[0] = hn::Max(acc[0], MagnitudeBits(d, hn::LoadU(d, x + i)));
  for (int a = 1; a < kAcc; ++a) acc[0] = hn::Max(acc[0], acc[a]);
  uint32_t largest = hn::GetLane(hn::MaxOfLanes(du, acc[0]));
  for (; i < n; ++i) largest = std::max(largest, float_bits(x[i]) & kMagnitudeMask);
  return bits_float(largest);
}

bool FiniteBlockMax(const float* x, int64_t rows, int64_t cols, int64_t ld, const float* shift,
                    const int64_t* row_cols, float* max_shifted, float* max_abs) {
  const D d;
  BlockMaxAcc acc;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_r = x + r * ld;
    const int64_t n = row_cols != nullptr ? row_cols[r] : cols;
    const V vs = Splat(shift[r]);
    int64_t i = 0;
    for (int a = 0; i + kLanes <= n; i += kLanes, a = (a + 1) % BlockMaxAcc::kAcc) {
      const V v = hn::LoadU(d, x_r + i);
      acc.add(a, v, hn::Sub(v, vs));
    }
    for (; i < n; ++i) acc.add_tail(x_r[i], x_r[i] - shift[r]);
  }
  return acc.finish(max_shifted, max_abs);
}

// The all-finite case in two vector reductions; otherwise one element at a time.
int64_t FiniteMax(const float* x, int64_t n, float* max_abs, float* max) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float best_abs = 0, best = -kInf;
  int64_t count = 0;
  int64_t i = 0;
  if (magnitude_finite(LargestMagnitude(x, n))) {
    const D d;
    V vabs = hn::Zero(d), vmax = Splat(-kInf);
    for (; i + kLanes <= n; i += kLanes) {
      const V v = hn::LoadU(d, x + i);
      vabs = hn::Max(vabs, hn::Abs(v));
      vmax = hn::Max(vmax, v);
    }
    best_abs = ExtremeLane<true>(vabs);
    best = ExtremeLane<true>(vmax);
  }
  for (; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      ++count;
      continue;
    }
    best_abs = std::max(best_abs, std::fabs(x[i]));
    best = std::max(best, x[i]);
  }
  *max_abs = best_abs;
  *max = best;
  return count;
}

}  // namespace HWY_NAMESPACE
}  // namespace attnscope::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnscope::cpu {

HWY_EXPORT(ExpF32);
HWY_EXPORT(ExpShiftedSum);
HWY_EXPORT(ExpShiftedScaledRows);
HWY_EXPORT(ExpShiftedScaledRowsMax);
HWY_EXPORT(MaxPropagatingNan);
HWY_EXPORT(DotF32);
HWY_EXPORT(DotRowsF32InOrder);
HWY_EXPORT(SumSquares);
HWY_EXPORT(FillRows);
HWY_EXPORT(ScaleInPlace);
HWY_EXPORT(RoundCopy);
HWY_EXPORT(RoundRows);
HWY_EXPORT(RowMaxima);
HWY_EXPORT(OnlineSoftmaxRows);
HWY_EXPORT(SoftmaxGradRows);
HWY_EXPORT(LargestMagnitude);
HWY_EXPORT(FiniteBlockMax);
HWY_EXPORT(FiniteMax);

float exp_f32(float x) {
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(ExpF32)(x);
}

float exp_shifted_sum(const float* s, float base, float* p, int64_t n) {
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(ExpShiftedSum)(s, base, p, n);
}

void exp_shifted_scaled_rows(int64_t rows, int64_t cols, int64_t ld, const float* s,
                             const float* base, const float* factor, float* p) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && cols <= ld);
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(ExpShiftedScaledRows)(rows, cols, ld, s, base, factor, p);
}

bool exp_shifted_scaled_rows_max(int64_t rows, int64_t cols, int64_t ld, const float* s,
                                 const float* base, const float* factor, float* p,
                                 float* max_shifted, float* max_abs) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && cols <= ld);
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(ExpShiftedScaledRowsMax)(rows, cols, ld, s, base, factor, p,
                                                       max_shifted, max_abs);
}

float max_propagating_nan(const float* x, int64_t n) {
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(MaxPropagatingNan)(x, n);
}

float dot_f32(const float* a, const float* b, int64_t n) {
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(DotF32)(a, b, n);
}

double sum_squares(const float* x, int64_t n) {
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(SumSquares)(x, n);
}

void dot_rows_f32_in_order(int64_t rows, int64_t n, const float* a, const float* b, float* out) {
  ATTNSCOPE_DCHECK(rows >= 0 && n >= 0);
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(DotRowsF32InOrder)(rows, n, a, b, out);
}

void fill_rows(int64_t rows, int64_t cols, int64_t ld, float value, float* dst) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && cols <= ld && (rows == 0 || dst != nullptr));
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(FillRows)(rows, cols, ld, value, dst);
}

void scale_in_place(float* x, float alpha, int64_t n) {
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(ScaleInPlace)(x, alpha, n);
}

bool row_maxima(Precision precision, const float* x, int64_t rows, int64_t dim, float* row_max) {
  ATTNSCOPE_DCHECK(rows >= 0 && dim >= 0 && (rows == 0 || (x != nullptr && row_max != nullptr)));
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(RowMaxima)(rounds(precision) ? precision : Precision::f32, x, rows,
                                         dim, row_max);
}

void round_copy(Precision precision, const float* src, float* dst, int64_t n) {
  if (!rounds(precision)) {
    if (dst != src) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(RoundCopy)(precision, src, dst, n);
}

void round_rows(Precision precision, int64_t rows, int64_t cols, int64_t ld, const float* src,
                float* dst) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && cols <= ld);
  if (!rounds(precision)) {
    if (dst == src) return;
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(dst + r * ld, src + r * ld, static_cast<size_t>(cols) * sizeof(float));
    }
    return;
  }
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(RoundRows)(precision, rows, cols, ld, src, dst);
}

float softmax_grad_rows(int64_t rows, int64_t cols, int64_t ld, const float* p, const float* dp,
                        const float* d, const float* gf, Precision precision, float* ds) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && cols <= ld);
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(SoftmaxGradRows)(rows, cols, ld, p, dp, d, gf, precision, ds);
}

void online_softmax_rows(int64_t rows, int64_t cols, int64_t ld, const float* s, float* p, float* m,
                         float* l, float* acc, int64_t dim_v, Precision precision,
                         BlockMax* s_max) {
  ATTNSCOPE_DCHECK(rows > 0 && rows <= kTileRows && cols > 0 && cols <= ld);
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(OnlineSoftmaxRows)
  (rows, cols, ld, s, p, m, l, acc, dim_v, precision, s_max);
}

float largest_magnitude(const float* x, int64_t n) {
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(LargestMagnitude)(x, n);
}

bool all_finite(const float* x, int64_t n) {
  return magnitude_finite(largest_magnitude(x, n));
}

int64_t count_nonfinite(const float* x, int64_t n) {
  if (all_finite(x, n)) return 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += (float_bits(x[i]) & kMagnitudeMask) > kMaxFiniteBits;
  return count;
}

int64_t finite_max(const float* x, int64_t n, float* max_abs, float* max) {
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(FiniteMax)(x, n, max_abs, max);
}

bool finite_block_max(const float* x, int64_t rows, int64_t cols, int64_t ld, const float* shift,
                      float* max_shifted, float* max_abs, const int64_t* row_cols) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && cols <= ld);
  choose_cpu_isa();
  return HWY_DYNAMIC_DISPATCH(FiniteBlockMax)(x, rows, cols, ld, shift, row_cols, max_shifted,
                                              max_abs);
}

}  // namespace attnscope::cpu
#endif  // HWY_ONCE
