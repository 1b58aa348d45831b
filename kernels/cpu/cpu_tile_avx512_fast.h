// AVX-512 fast path for float32, float16 and bfloat16 tiles. Included inside
// the AVX-512 namespace of cpu_tile_avx512.cc, after cpu_tile.h, whose
// ReduceTileF serves as the exact fallback.
//
// Pass 1 reads the tile once for the moments (double), min/max and all counts,
// with no masking: a non-finite value shows as a non-finite sum of |x|.
// Such tiles (rare) are redone by the fully-masked ReduceTileF. Pass 2 reads
// the tile again (from L1) for the exponent histogram: the exponent fields of
// 64 values are packed into one vector of bytes, each holding the value's
// octave below the tile's largest one, turned into one-hot bits for the top
// kWindow octaves and counted by bit position (CountWindowOctaves). Values
// further down (and float subnormals) are binned by an exact scalar fix-up
// that runs only when the counts say there are some.

#include <immintrin.h>

inline constexpr int kWindow = 16;  // octaves counted by compares

template <DType D>
static inline __m512 LoadF16Lanes(const unsigned char* p) {
  if constexpr (D == DType::kFloat32) {
    return _mm512_loadu_ps(p);
  } else if constexpr (D == DType::kFloat16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    static_assert(D == DType::kBFloat16, "fast path covers f32, f16, bf16");
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
}

static inline double HSumPd(__m512d v) { return _mm512_reduce_add_pd(v); }

// Per-bit counts of a stream of 512-bit vectors: how many of the vectors
// added have bit j of byte b set, summed over b, for each j in 0..7. Vectors
// are added 16 at a time through a carry-save adder tree (Harley-Seal): the
// running ones/twos/fours/eights planes hold each bit position's count in
// binary, and only every sixteenth carry is counted out with popcounts.
struct BitPlaneCounter {
  __m512i ones = _mm512_setzero_si512(), twos = ones, fours = ones, eights = ones;
  std::uint64_t counts[8] = {};
};

// (high, low) = the two-bit sum a + b + c of each bit position.
static inline void CarrySave(__m512i* high, __m512i* low, __m512i a, __m512i b, __m512i c) {
  *low = _mm512_ternarylogic_epi32(a, b, c, 0x96);   // a ^ b ^ c
  *high = _mm512_ternarylogic_epi32(a, b, c, 0xe8);  // majority
}

// counts[j] += weight * (bytes of v with bit j set).
static inline void AddBitCounts(__m512i v, std::uint64_t weight, std::uint64_t* counts) {
  for (int j = 0; j < 8; ++j) {
    const __mmask64 m = _mm512_test_epi8_mask(v, _mm512_set1_epi8(static_cast<char>(1 << j)));
    counts[j] += weight * static_cast<std::uint64_t>(_mm_popcnt_u64(m));
  }
}

// Adds 16 vectors, d(0) .. d(15), to c.
template <class Next>
static inline void AddSixteen(BitPlaneCounter* c, Next&& d) {
  __m512i twos_a, twos_b, fours_a, fours_b, eights_a, eights_b, sixteens;
  auto fours_of_four = [&](__m512i* fours_out) {
    CarrySave(&twos_a, &c->ones, c->ones, d(), d());
    CarrySave(&twos_b, &c->ones, c->ones, d(), d());
    CarrySave(fours_out, &c->twos, c->twos, twos_a, twos_b);
  };
  fours_of_four(&fours_a);
  fours_of_four(&fours_b);
  CarrySave(&eights_a, &c->fours, c->fours, fours_a, fours_b);
  fours_of_four(&fours_a);
  fours_of_four(&fours_b);
  CarrySave(&eights_b, &c->fours, c->fours, fours_a, fours_b);
  CarrySave(&sixteens, &c->eights, c->eights, eights_a, eights_b);
  AddBitCounts(sixteens, 16, c->counts);
}

static inline void FinishBitCounts(BitPlaneCounter* c) {
  AddBitCounts(c->eights, 8, c->counts);
  AddBitCounts(c->fours, 4, c->counts);
  AddBitCounts(c->twos, 2, c->counts);
  AddBitCounts(c->ones, 1, c->counts);
}

// bins[k] = the number of the first nv * 16 values whose exponent field is
// window_base + k (0 <= k < kWindow = 16). Each value's key, field -
// window_base, is packed to a signed byte (negative below the window: its
// top bit set), and one byte shuffle per half of the window turns 64 keys into
// one-hot bits (bit k of `low` for keys 0..7, bit k - 8 of `high` for 8..15),
// counted by bit position. 64 values cost 4 key vectors, 3 packs, 2 shuffles
// and ~4 adder ops, where comparing against each octave costs 32.
template <DType D>
static void CountWindowOctaves(const unsigned char* base, std::int64_t nv, int window_base,
                               std::uint64_t* bins) {
  static_assert(kWindow == 16, "two one-hot bytes of 8 octaves each");
  constexpr std::int64_t kElem = static_cast<std::int64_t>(DTypeSize(D));
  const __m512i vbase = _mm512_set1_epi32(window_base);
  const __m512i none = _mm512_set1_epi32(-1);
  // vpshufb tables (the same in each 128-bit lane): key -> one-hot byte.
  const __m512i table_low =
      _mm512_broadcast_i32x4(_mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0));
  const __m512i table_high =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, -128));
  // field - window_base of the 16 values of vector v (none past the end).
  auto keys = [&](std::int64_t v) {
    if (v >= nv) return none;
    const __m512i bits = _mm512_castps_si512(LoadF16Lanes<D>(base + v * 16 * kElem));
    return _mm512_sub_epi32(_mm512_srli_epi32(_mm512_slli_epi32(bits, 1), 24), vbase);
  };
  BitPlaneCounter low, high;
  // 1,024 values per block: `low` pulls 16 one-hot vectors, and the `high`
  // ones made alongside wait for their turn.
  for (std::int64_t v0 = 0; v0 < nv; v0 += 16 * 4) {
    __m512i high_in[16];
    int next_low = 0;
    AddSixteen(&low, [&]() {
      const std::int64_t v = v0 + 4 * next_low;
      const __m512i kb = _mm512_packs_epi16(_mm512_packs_epi32(keys(v), keys(v + 1)),
                                            _mm512_packs_epi32(keys(v + 2), keys(v + 3)));
      high_in[next_low++] = _mm512_shuffle_epi8(table_high, kb);
      return _mm512_shuffle_epi8(table_low, kb);
    });
    int next_high = 0;
    AddSixteen(&high, [&]() { return high_in[next_high++]; });
  }
  FinishBitCounts(&low);
  FinishBitCounts(&high);
  for (int k = 0; k < 8; ++k) {
    bins[k] = low.counts[k];
    bins[8 + k] = high.counts[k];
  }
}

template <DType D>
__attribute__((flatten)) static void ReduceTileFastAvx512(const unsigned char* base, std::int64_t n,
                                                          const Thresholds<float>& th,
                                                          TileState* st) {
  constexpr std::int64_t kElem = static_cast<std::int64_t>(DTypeSize(D));
  const std::int64_t nv = n / 16;
  if (nv == 0) return ReduceTileF<D>(base, n, th, st);

  // Shift for the moments: the running mean of the tensor so far (so d = x -
  // shift stays small and float block sums stay accurate), or for the first
  // tile the mean of its first 16 values. A non-finite value sends the tile to
  // the fallback anyway.
  float shift;
  if (st->partial.n > 0) {
    shift = static_cast<float>(st->partial.mean);
  } else {
    float s16 = 0.0f;
    for (int i = 0; i < 16; ++i) s16 += DecodeScalarF<D>(base, i);
    shift = s16 * 0.0625f;
  }
  if (!(shift - shift == 0.0f)) return ReduceTileF<D>(base, n, th, st);
  const __m512 vshift = _mm512_set1_ps(shift);
  const __m512 vlo = _mm512_set1_ps(th.band_lo), vhi = _mm512_set1_ps(th.band_hi);
  const __m512 veps = _mm512_set1_ps(th.small_eps), vzero = _mm512_setzero_ps();
  const __m512i vabs = _mm512_set1_epi32(0x7fffffff);

  __m512 vmn = _mm512_set1_ps(__builtin_inff()), vmx = _mm512_set1_ps(-__builtin_inff());
  __m512d sd0 = _mm512_setzero_pd(), sd1 = sd0, sq0 = sd0, sq1 = sd0, l10 = sd0, l11 = sd0;
  // Counts: four as popcounts of compare masks on the scalar ports, which
  // are otherwise idle here, and the others in vector lanes (masked
  // decrements of -1; at most 256 per lane per tile, so 32-bit lanes cannot
  // overflow). All five in vectors, or all five as popcounts, is slower.
  std::uint64_t c_neg = 0, c_lo = 0, c_hi = 0, c_zero = 0;
  const __m512i vm1 = _mm512_set1_epi32(-1);
  __m512i v_small = _mm512_setzero_si512();
  // float16 subnormals decode to normal floats, so the histogram fix-up does not
  // see them: count them here (f32 and bf16 subnormals are counted there).
  __m512i v_sub16 = v_small;
  const __m512i vminn16 = _mm512_set1_epi32(static_cast<int>(FloatBits(th.min_normal)));
  auto widen_add = [](__m512d* a0, __m512d* a1, __m512 v) {
    *a0 = _mm512_add_pd(*a0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    *a1 = _mm512_add_pd(
        *a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  };
  // Moments are summed in float over blocks of kBlock vectors (8 terms per
  // lane), then the block sums are added in double.
  constexpr std::int64_t kBlock = 8;
  for (std::int64_t b0 = 0; b0 < nv; b0 += kBlock) {
    const std::int64_t b1 = b0 + kBlock < nv ? b0 + kBlock : nv;
    __m512 fsd = _mm512_setzero_ps(), fsq = fsd, fl1 = fsd;
    for (std::int64_t b = b0; b < b1; ++b) {
      const __m512 x = LoadF16Lanes<D>(base + b * 16 * kElem);
      const __m512i absb = _mm512_and_si512(_mm512_castps_si512(x), vabs);
      const __m512 ax = _mm512_castsi512_ps(absb);
      vmn = _mm512_min_ps(vmn, x);
      vmx = _mm512_max_ps(vmx, x);
      c_neg += _mm_popcnt_u32(_mm512_cmp_ps_mask(x, vzero, _CMP_LT_OQ));
      c_lo += _mm_popcnt_u32(_mm512_cmp_ps_mask(x, vlo, _CMP_LE_OQ));
      c_hi += _mm_popcnt_u32(_mm512_cmp_ps_mask(x, vhi, _CMP_GE_OQ));
      c_zero += _mm_popcnt_u32(_mm512_testn_epi32_mask(absb, absb));
      v_small =
          _mm512_mask_sub_epi32(v_small, _mm512_cmp_ps_mask(ax, veps, _CMP_LT_OQ), v_small, vm1);
      if constexpr (D == DType::kFloat16) {
        const __mmask16 sub16 = _mm512_cmplt_epu32_mask(absb, vminn16) &
                                _mm512_cmpneq_epi32_mask(absb, _mm512_setzero_si512());
        v_sub16 = _mm512_mask_sub_epi32(v_sub16, sub16, v_sub16, vm1);
      }
      const __m512 d = _mm512_sub_ps(x, vshift);
      fsd = _mm512_add_ps(fsd, d);
      fsq = _mm512_fmadd_ps(d, d, fsq);
      fl1 = _mm512_add_ps(fl1, ax);
    }
    widen_add(&sd0, &sd1, fsd);
    widen_add(&sq0, &sq1, fsq);
    widen_add(&l10, &l11, fl1);
  }
  // A non-finite value makes the sum of |x| non-finite (NaN and Inf stick;
  // min and max may drop a NaN). Such tiles, and magnitudes where float block
  // sums could overflow (|x| >= 2^61: d^2 summed 8 times must stay below
  // FLT_MAX) or lose precision to underflow (|x| < 2^-60), go to the
  // double-precision path.
  double l1 = HSumPd(_mm512_add_pd(l10, l11));
  if (!std::isfinite(l1)) return ReduceTileF<D>(base, n, th, st);
  float mn = _mm512_reduce_min_ps(vmn), mx = _mm512_reduce_max_ps(vmx);
  const std::uint32_t maxabs_bits = FloatBits(-mn > mx ? -mn : mx);
  constexpr std::uint32_t kMaxFastBits = (127u + 61u) << 23;  // 2^61
  constexpr std::uint32_t kMinFastBits = (127u - 60u) << 23;  // 2^-60
  if (maxabs_bits >= kMaxFastBits || (maxabs_bits < kMinFastBits && maxabs_bits != 0)) {
    return ReduceTileF<D>(base, n, th, st);
  }
  std::uint64_t c_small = static_cast<std::uint64_t>(_mm512_reduce_add_epi32(v_small));
  std::uint64_t c_sub16 = static_cast<std::uint64_t>(_mm512_reduce_add_epi32(v_sub16));

  // Scalar tail (fewer than 16 values), same rules.
  double sd = HSumPd(_mm512_add_pd(sd0, sd1)), sq = HSumPd(_mm512_add_pd(sq0, sq1));
  float amax = FloatFromBits(maxabs_bits);
  for (std::int64_t i = nv * 16; i < n; ++i) {
    const float x = DecodeScalarF<D>(base, i);
    const float ax = __builtin_fabsf(x);
    if (!(x - x == 0.0f)) return ReduceTileF<D>(base, n, th, st);
    c_neg += x < 0.0f;
    c_lo += x <= th.band_lo;
    c_hi += x >= th.band_hi;
    c_small += ax < th.small_eps;
    c_zero += x == 0.0f;
    if (D == DType::kFloat16) c_sub16 += ax < th.min_normal && x != 0.0f;
    mn = x < mn ? x : mn;
    mx = x > mx ? x : mx;
    amax = ax > amax ? ax : amax;
    const double d = static_cast<double>(x) - static_cast<double>(shift);
    sd += d;
    sq = d * d + sq;
    l1 += static_cast<double>(ax);
  }

  // Float block sums are accurate only when the values are near the shift
  // (|x - shift| within a few times the tile's own range) and cannot overflow
  // (|x - shift| < 2^61). A tile far from the running mean (non-stationary
  // data, a constant tile) is redone in double.
  {
    const double dmax = std::fmax(std::fabs(static_cast<double>(mx) - shift),
                                  std::fabs(static_cast<double>(mn) - shift));
    const double range = static_cast<double>(mx) - static_cast<double>(mn);
    if (!(dmax <= 4.0 * range) || !(dmax < 2305843009213693952.0)) {  // 2^61
      return ReduceTileF<D>(base, n, th, st);
    }
  }

  // Pass 2: exponent histogram of the top kWindow octaves below the largest |x|.
  const int top = static_cast<int>((FloatBits(amax) >> 23) & 0xffu);
  const int window_base = top - (kWindow - 1);
  std::uint64_t in_window = 0;
  if (top != 0) {
    std::uint64_t bins[kWindow] = {};
    CountWindowOctaves<D>(base, nv, window_base, bins);
    for (int k = 0; k < kWindow; ++k) {
      const int field = window_base + k;
      if (bins[k] == 0) continue;
      if (field >= 1) {  // fields < 1 count nothing
        st->AddToBin(field - 127 - kExpHistMinExp, bins[k]);
      }
      in_window += bins[k];
    }
    for (std::int64_t i = nv * 16; i < n; ++i) {  // tail of fewer than 16
      const int field = static_cast<int>((FloatBits(DecodeScalarF<D>(base, i)) >> 23) & 0xffu);
      if (field >= window_base && field >= 1) {
        st->AddToBin(field - 127 - kExpHistMinExp, 1);
        ++in_window;
      }
    }
  }
  // Every non-zero value must be in the window; the others (values more than
  // kWindow octaves below the largest, and subnormals) are binned exactly
  // here, where subnormals are also counted. Whole vectors are skipped unless
  // one of their lanes is below the window.
  std::uint64_t subnormals = 0;
  if (in_window < static_cast<std::uint64_t>(n) - c_zero) {
    const __m512i vlim = _mm512_set1_epi32(window_base < 1 ? 1 : window_base);
    for (std::int64_t b = 0; b < nv; ++b) {
      const __m512 x = LoadF16Lanes<D>(base + b * 16 * kElem);
      const __m512i absb = _mm512_and_si512(_mm512_castps_si512(x), vabs);
      const __mmask16 low = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(absb, 23), vlim) &
                            _mm512_cmpneq_epi32_mask(absb, _mm512_setzero_si512());
      for (unsigned m = low; m != 0; m &= m - 1) {
        const float v = DecodeScalarF<D>(base, b * 16 + __builtin_ctz(m));
        st->AddToBin(ExponentBin(v), 1);
        subnormals += __builtin_fabsf(v) < th.min_normal;
      }
    }
    for (std::int64_t i = nv * 16; i < n; ++i) {
      const float x = DecodeScalarF<D>(base, i);
      const int field = static_cast<int>((FloatBits(x) >> 23) & 0xffu);
      if ((field >= 1 && field < window_base) || (field == 0 && x != 0.0f)) {
        st->AddToBin(ExponentBin(x), 1);
        subnormals += __builtin_fabsf(x) < th.min_normal;
      }
    }
  }

  StatsPartial p = StatsPartial::Identity();
  p.count = static_cast<std::uint64_t>(n);
  p.neg_count = c_neg;
  p.band_lo_count = c_lo;
  p.band_hi_count = c_hi;
  p.small_count = c_small;
  p.zero_count = c_zero;
  p.subnormal_count = D == DType::kFloat16 ? c_sub16 : subnormals;
  p.l1 = l1;
  p.n = static_cast<std::uint64_t>(n);
  const double nn = static_cast<double>(n);
  const double md = sd / nn;
  p.mean = static_cast<double>(shift) + md;
  const double m2 = sq - sd * md;
  p.m2 = m2 > 0.0 ? m2 : 0.0;
  p.min = mn;
  p.max = mx;
  p.amax = amax;
  st->partial = Merge(st->partial, p);
}
