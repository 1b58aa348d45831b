// The CPU backend's hot loop: one tile of a tensor (at most kTileElems
// elements) reduced in one read, with 64-byte vectors of GCC's vector
// extensions (AVX-512, AVX2 or SSE, depending on the flags of the including
// translation unit: cpu_tile_{avx512,avx2,generic}.cc).
//
// No per-element branches on the fast path: non-finite values are masked, and
// the exponent histogram is a histogram of the raw exponent field kept in
// kSubHists interleaved copies (so runs of equal exponents don't serialize on
// one counter), mapped to floor(log2|x|) bins when flushed. Two rare cases take
// a scalar pass over the tile: non-finite values (to split NaN/+Inf/-Inf) and
// float subnormals (whose bin depends on the mantissa).
//
// This header is included inside a per-ISA namespace; it must not define
// anything with external linkage outside it.

// (no #pragma once: included once per ISA namespace)

// Everything here is forced inline into the two tile functions (flatten), so
// this ISA's object file emits no out-of-line copy of a shared inline helper
// that the linker could pick for code running on a CPU without this ISA.

// TSTAT_TILE_VEC_BYTES (set by the including file) is the native vector width
// of the ISA: wider vectors than the ISA has get split into slow code.
inline constexpr int kVecBytes = TSTAT_TILE_VEC_BYTES;
inline constexpr int kLanesF = kVecBytes / 4;  // floats per vector
inline constexpr int kLanesD = kVecBytes / 8;  // doubles per vector
typedef float VecF __attribute__((vector_size(kVecBytes)));
typedef std::int32_t VecI __attribute__((vector_size(kVecBytes)));
typedef double VecD __attribute__((vector_size(kVecBytes)));
typedef std::int64_t VecL __attribute__((vector_size(kVecBytes)));
typedef float HalfVecF __attribute__((vector_size(kVecBytes / 2)));

// Lower / upper half of a float vector, widened to doubles.
template <std::size_t... I>
static inline VecD LowHalfToDouble(VecF v, std::index_sequence<I...>) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, I...), VecD);
}
template <std::size_t... I>
static inline VecD HighHalfToDouble(VecF v, std::index_sequence<I...>) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, (I + kLanesD)...), VecD);
}

// Multiply then add, never fused (the build has -ffp-contract=off): every ISA
// variant of this file then rounds identically.
#define TSTAT_TILE_MULADD(a, b, c) ((a) * (b) + (c))

template <class V, class S>
static inline V Splat(S s) {
  V v = {};
  // The lane type exactly: clang refuses long long + a vector of long.
  using Lane = std::remove_cv_t<std::remove_reference_t<decltype(v[0])>>;
  return v + static_cast<Lane>(s);
}

// Loads kLanesF consecutive floats (decoding narrow types) starting at element i.
template <DType D>
static inline VecF LoadF(const unsigned char* base, std::int64_t i) {
  VecF x;
  if constexpr (D == DType::kFloat32) {
    std::memcpy(&x, base + i * 4, sizeof x);
  } else if constexpr (D == DType::kBFloat16) {
    std::uint16_t h[kLanesF];
    std::memcpy(h, base + i * 2, sizeof h);
    VecI u;
    for (int l = 0; l < kLanesF; ++l)
      u[l] = static_cast<std::int32_t>(static_cast<std::uint32_t>(h[l]) << 16);
    x = (VecF)u;
  } else {
    for (int l = 0; l < kLanesF; ++l) x[l] = DecodeScalarF<D>(base, i + l);
  }
  return x;
}

// Splits a tile's non-finite values into NaN, +Inf and -Inf (rare: only for
// tiles that have any). `decode(i)`: element i as a float or a double.
template <typename Decode>
static void CountNonFinite(std::int64_t n, Decode decode, StatsPartial* p) {
  for (std::int64_t i = 0; i < n; ++i) {
    const auto x = decode(i);
    const auto inf = static_cast<decltype(x)>(__builtin_inf());
    if (x != x) {
      ++p->nan_count;
    } else if (x == inf) {
      ++p->pos_inf_count;
    } else if (x == -inf) {
      ++p->neg_inf_count;
    }
  }
}

// Float-path tile: f32, f16, bf16, f8 (all decode exactly to float).
template <DType D>
__attribute__((flatten)) static void ReduceTileF(const unsigned char* base, std::int64_t n,
                                                 const Thresholds<float>& th, TileState* st) {
  // Shift for the moments: the first finite value of the tile.
  float shift = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = DecodeScalarF<D>(base, i);
    if (v - v == 0.0f) {
      shift = v;
      break;
    }
  }
  const VecF vshift = Splat<VecF>(shift);
  const VecD vshiftd = Splat<VecD>(static_cast<double>(shift));
  const VecF vlo = Splat<VecF>(th.band_lo), vhi = Splat<VecF>(th.band_hi);
  const VecF veps = Splat<VecF>(th.small_eps), vminn = Splat<VecF>(th.min_normal);
  const VecF vinf = Splat<VecF>(__builtin_inff()), vzero = Splat<VecF>(0.0f);
  const VecI vexpmask = Splat<VecI>(0x7f800000), vabsmask = Splat<VecI>(0x7fffffff);

  VecF mn = vinf, mx = -vinf, amx = vzero, amn = vinf;
  VecI c_neg = {}, c_lo = {}, c_hi = {}, c_small = {}, c_zero = {}, c_nonfin = {}, c_sub = {};
  VecD sd_a = {}, sd_b = {}, sd2_a = {}, sd2_b = {}, l1_a = {}, l1_b = {};

  std::uint32_t* sub = &st->sub[0][0];
  const std::int64_t nv = n / kLanesF;
  for (std::int64_t b = 0; b < nv; ++b) {
    const VecF x = LoadF<D>(base, b * kLanesF);
    const VecI bits = (VecI)x;
    const VecI expf = bits & vexpmask;
    const VecI fin = expf != vexpmask;  // -1 where finite
    const VecI absb = bits & vabsmask;
    const VecF ax = (VecF)absb;
    const VecF xs = fin ? x : vshift;
    mn = fin ? (x < mn ? x : mn) : mn;
    mx = fin ? (x > mx ? x : mx) : mx;
    const VecF axf = fin ? ax : vzero;
    amx = axf > amx ? axf : amx;
    const VecF axnz = (axf == vzero) ? vinf : axf;  // smallest non-zero finite |x|
    amn = axnz < amn ? axnz : amn;
    c_neg += (x < vzero);  // masks are -1: counts are negated, fixed below
    c_lo += (x <= vlo);
    c_hi += (x >= vhi);
    c_small += (ax < veps);
    c_zero += (x == vzero);
    c_nonfin += ~fin;
    c_sub += (ax < vminn) & (x != vzero);
    constexpr auto kHalf = std::make_index_sequence<kLanesD>{};
    const VecD d0 = LowHalfToDouble(xs, kHalf) - vshiftd;
    const VecD d1 = HighHalfToDouble(xs, kHalf) - vshiftd;
    sd_a += d0;
    sd_b += d1;
    sd2_a = TSTAT_TILE_MULADD(d0, d0, sd2_a);
    sd2_b = TSTAT_TILE_MULADD(d1, d1, sd2_b);
    l1_a += LowHalfToDouble(axf, kHalf);
    l1_b += HighHalfToDouble(axf, kHalf);
  }

  // Scalar remainder with the same rules.
  float smn = __builtin_inff(), smx = -__builtin_inff(), samx = 0.0f, samn = __builtin_inff();
  std::int64_t s_neg = 0, s_lo = 0, s_hi = 0, s_small = 0, s_zero = 0, s_nonfin = 0, s_sub = 0;
  double ssd = 0.0, ssd2 = 0.0, sl1 = 0.0;
  for (std::int64_t i = nv * kLanesF; i < n; ++i) {
    const float x = DecodeScalarF<D>(base, i);
    const float ax = __builtin_fabsf(x);
    const bool fin = x - x == 0.0f;
    s_neg += x < 0.0f;
    s_lo += x <= th.band_lo;
    s_hi += x >= th.band_hi;
    s_small += ax < th.small_eps;
    s_zero += x == 0.0f;
    s_sub += (ax < th.min_normal) && x != 0.0f;
    if (!fin) {
      ++s_nonfin;
      continue;
    }
    smn = x < smn ? x : smn;
    smx = x > smx ? x : smx;
    samx = ax > samx ? ax : samx;
    samn = (ax != 0.0f && ax < samn) ? ax : samn;
    const double d = static_cast<double>(x) - static_cast<double>(shift);
    ssd += d;
    ssd2 = TSTAT_TILE_MULADD(d, d, ssd2);
    sl1 += static_cast<double>(ax);
  }

  // Exponent-field histogram: a second read of the tile, now in L1.
  {
    std::int64_t i = 0;
    for (; i + kSubHists <= n; i += kSubHists) {
      for (int k = 0; k < kSubHists; ++k) {
        const std::uint32_t u = FloatBits(DecodeScalarF<D>(base, i + k));
        ++sub[k * kSubBins + ((u >> 23) & 0xffu)];
      }
    }
    for (; i < n; ++i) ++sub[(FloatBits(DecodeScalarF<D>(base, i)) >> 23) & 0xffu];
  }

  // Horizontal sums.
  std::int64_t neg = s_neg, lo = s_lo, hi = s_hi, small = s_small, zero = s_zero, nonfin = s_nonfin,
               subn = s_sub;
  float vmn = smn, vmx = smx, vamx = samx, vamn = samn;
  for (int l = 0; l < kLanesF; ++l) {
    neg -= c_neg[l];
    lo -= c_lo[l];
    hi -= c_hi[l];
    small -= c_small[l];
    zero -= c_zero[l];
    nonfin -= c_nonfin[l];
    subn -= c_sub[l];
    vmn = mn[l] < vmn ? mn[l] : vmn;
    vmx = mx[l] > vmx ? mx[l] : vmx;
    vamx = amx[l] > vamx ? amx[l] : vamx;
    vamn = amn[l] < vamn ? amn[l] : vamn;
  }
  double sd = ssd, sd2 = ssd2, l1 = sl1;
  for (int l = 0; l < kLanesD; ++l) {
    sd += sd_a[l] + sd_b[l];
    sd2 += sd2_a[l] + sd2_b[l];
    l1 += l1_a[l] + l1_b[l];
  }

  StatsPartial p = StatsPartial::Identity();
  p.count = static_cast<std::uint64_t>(n);
  p.neg_count = neg;
  p.band_lo_count = lo;
  p.band_hi_count = hi;
  p.small_count = small;
  p.zero_count = zero;
  p.subnormal_count = subn;
  p.l1 = l1;
  p.n = static_cast<std::uint64_t>(n - nonfin);
  if (p.n > 0) {
    const double nn = static_cast<double>(p.n);
    const double md = sd / nn;
    p.mean = static_cast<double>(shift) + md;
    const double m2 = sd2 - sd * md;
    p.m2 = m2 > 0.0 ? m2 : 0.0;
    p.min = vmn;
    p.max = vmx;
    p.amax = vamx;
  }
  if (vamn != __builtin_inff())
    st->TouchKeys((FloatBits(vamn) >> 23) & 0xffu, (FloatBits(vamx) >> 23) & 0xffu);
  st->pending += static_cast<std::uint64_t>(n);
  if (nonfin > 0)
    CountNonFinite(
        n, [&](std::int64_t i) { return DecodeScalarF<D>(base, i); }, &p);
  // Rare: f32 and bf16 subnormals are float subnormals, whose bin needs the
  // mantissa (f16/fp8 subnormals decode to normal floats and are binned above).
  if (subn > 0 && (D == DType::kFloat32 || D == DType::kBFloat16)) {
    for (std::int64_t i = 0; i < n; ++i) {
      const float x = DecodeScalarF<D>(base, i);
      if (x != 0.0f && ((FloatBits(x) >> 23) & 0xffu) == 0) {
        st->AddToBin(ExponentBin(x), 1);
      }
    }
  }
  st->partial = Merge(st->partial, p);
}

// Double-path tile: f64 and the integer types (converted to double). The
// histogram key is the clamped bin itself (ExponentBin for doubles), with zeros
// and non-finite values (which land in the first/last bin) subtracted at flush.
template <DType D>
__attribute__((flatten)) static void ReduceTileD(const unsigned char* base, std::int64_t n,
                                                 const Thresholds<double>& th, TileState* st) {
  double shift = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = DecodeScalarD<D>(base, i);
    if (v - v == 0.0) {
      shift = v;
      break;
    }
  }
  const VecD vshift = Splat<VecD>(shift);
  const VecD vlo = Splat<VecD>(th.band_lo), vhi = Splat<VecD>(th.band_hi);
  const VecD veps = Splat<VecD>(th.small_eps), vminn = Splat<VecD>(th.min_normal);
  const VecD vinf = Splat<VecD>(__builtin_inf()), vzero = Splat<VecD>(0.0);
  const VecL vexpmask = Splat<VecL>(0x7ff0000000000000LL),
             vabsmask = Splat<VecL>(0x7fffffffffffffffLL);

  VecD mn = vinf, mx = -vinf, amx = vzero, amn = vinf, sd = {}, sd2 = {}, l1 = {};
  VecL c_neg = {}, c_lo = {}, c_hi = {}, c_small = {}, c_zero = {}, c_nonfin = {}, c_sub = {};
  const std::int64_t nv = n / kLanesD;
  for (std::int64_t b = 0; b < nv; ++b) {
    VecD x;
    if constexpr (D == DType::kFloat64) {
      std::memcpy(&x, base + b * kVecBytes, sizeof x);
    } else {
      for (int l = 0; l < kLanesD; ++l) x[l] = DecodeScalarD<D>(base, b * kLanesD + l);
    }
    const VecL bits = (VecL)x;
    const VecL fin = (bits & vexpmask) != vexpmask;
    const VecL absb = bits & vabsmask;
    const VecD ax = (VecD)absb;
    const VecD xs = fin ? x : vshift;
    mn = fin ? (x < mn ? x : mn) : mn;
    mx = fin ? (x > mx ? x : mx) : mx;
    const VecD axf = fin ? ax : vzero;
    amx = axf > amx ? axf : amx;
    const VecD axnz = (axf == vzero) ? vinf : axf;
    amn = axnz < amn ? axnz : amn;
    c_neg += (x < vzero);
    c_lo += (x <= vlo);
    c_hi += (x >= vhi);
    c_small += (ax < veps);
    c_zero += (x == vzero);
    c_nonfin += ~fin;
    c_sub += (ax < vminn) & (x != vzero);
    const VecD d = xs - vshift;
    sd += d;
    sd2 = TSTAT_TILE_MULADD(d, d, sd2);
    l1 += axf;
  }
  double smn = __builtin_inf(), smx = -__builtin_inf(), samx = 0.0, samn = __builtin_inf();
  double ssd = 0.0, ssd2 = 0.0, sl1 = 0.0;
  std::int64_t neg = 0, lo = 0, hi = 0, small = 0, zero = 0, nonfin = 0, subn = 0;
  for (std::int64_t i = nv * kLanesD; i < n; ++i) {
    const double x = DecodeScalarD<D>(base, i);
    const double ax = __builtin_fabs(x);
    neg += x < 0.0;
    lo += x <= th.band_lo;
    hi += x >= th.band_hi;
    small += ax < th.small_eps;
    zero += x == 0.0;
    subn += (ax < th.min_normal) && x != 0.0;
    if (!(x - x == 0.0)) {
      ++nonfin;
      continue;
    }
    smn = x < smn ? x : smn;
    smx = x > smx ? x : smx;
    samx = ax > samx ? ax : samx;
    samn = (ax != 0.0 && ax < samn) ? ax : samn;
    const double d = x - shift;
    ssd += d;
    ssd2 = TSTAT_TILE_MULADD(d, d, ssd2);
    sl1 += ax;
  }
  std::uint32_t* sub = &st->sub[0][0];
  {
    std::int64_t i = 0;
    for (; i + kSubHists <= n; i += kSubHists) {
      for (int k = 0; k < kSubHists; ++k) {
        const std::uint64_t u = DoubleBits(DecodeScalarD<D>(base, i + k));
        const std::int64_t f = static_cast<std::int64_t>((u >> 52) & 0x7ffu) - 873;  // bin
        ++sub[k * kSubBins + (f < 0 ? 0 : f > kExpHistBins - 1 ? kExpHistBins - 1 : f)];
      }
    }
    for (; i < n; ++i) {
      const std::int64_t f =
          static_cast<std::int64_t>((DoubleBits(DecodeScalarD<D>(base, i)) >> 52) & 0x7ffu) - 873;
      ++sub[f < 0 ? 0 : f > kExpHistBins - 1 ? kExpHistBins - 1 : f];
    }
  }
  for (int l = 0; l < kLanesD; ++l) {
    neg -= c_neg[l];
    lo -= c_lo[l];
    hi -= c_hi[l];
    small -= c_small[l];
    zero -= c_zero[l];
    nonfin -= c_nonfin[l];
    subn -= c_sub[l];
    smn = mn[l] < smn ? mn[l] : smn;
    smx = mx[l] > smx ? mx[l] : smx;
    samx = amx[l] > samx ? amx[l] : samx;
    samn = amn[l] < samn ? amn[l] : samn;
    ssd += sd[l];
    ssd2 += sd2[l];
    sl1 += l1[l];
  }
  StatsPartial p = StatsPartial::Identity();
  p.count = static_cast<std::uint64_t>(n);
  p.neg_count = neg;
  p.band_lo_count = lo;
  p.band_hi_count = hi;
  p.small_count = small;
  p.zero_count = zero;
  p.subnormal_count = subn;
  p.l1 = sl1;
  p.n = static_cast<std::uint64_t>(n - nonfin);
  if (p.n > 0) {
    const double nn = static_cast<double>(p.n);
    const double md = ssd / nn;
    p.mean = shift + md;
    const double m2 = ssd2 - ssd * md;
    p.m2 = m2 > 0.0 ? m2 : 0.0;
    p.min = smn;
    p.max = smx;
    p.amax = samx;
  }
  if (nonfin > 0)
    CountNonFinite(
        n, [&](std::int64_t i) { return DecodeScalarD<D>(base, i); }, &p);
  // Keys (= bins) touched: the non-zero finite range, plus the first and last
  // bin where zeros and non-finite values land.
  if (samn != __builtin_inf()) st->TouchKeys(ExponentBin(samn), ExponentBin(samx));
  st->TouchKeys(0, 0);
  st->TouchKeys(kExpHistBins - 1, kExpHistBins - 1);
  st->pending += static_cast<std::uint64_t>(n);
  st->pending_first_bin_excess += static_cast<std::uint64_t>(zero);
  st->pending_last_bin_excess += static_cast<std::uint64_t>(nonfin);
  st->partial = Merge(st->partial, p);
}
