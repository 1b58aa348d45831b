// The CPU delta pass's hot loop: one block of (x, previous) pairs reduced with
// the per-pair rule of AddDeltaPair (kernels/aux_ops.h), eight pairs at a
// time, without branches.
//
// Pair i goes to lane i % 8 of eight fixed accumulator lanes, whatever the
// ISA's vector width (a 64-byte vector of doubles is split by the compiler
// where the ISA is narrower); the lanes fold in lane order, then the last
// n % 8 pairs are added one by one. With -ffp-contract=off every ISA's copy
// therefore gives the same bits, and the serial loop this replaced cost about
// six times as much per pair (a dependent chain of double adds per pair).
//
// Included inside a per-ISA namespace by cpu_tile_isa.inc, like cpu_tile.h:
// the block function is flattened so that no inline helper is emitted out of
// line with this ISA's instructions.

// (no #pragma once: included once per ISA namespace)

typedef double DeltaVecD __attribute__((vector_size(64)));
typedef std::int64_t DeltaVecL __attribute__((vector_size(64)));
typedef float DeltaVecF __attribute__((vector_size(32)));
inline constexpr int kDeltaLanes = 8;

// Pairs [i, i + 8) of a tensor, decoded exactly to double.
template <DType D>
static inline DeltaVecD LoadDelta8(const unsigned char* base, std::int64_t i) {
  if constexpr (D == DType::kFloat64) {
    DeltaVecD v;
    std::memcpy(&v, base + i * 8, sizeof v);
    return v;
  } else {
    DeltaVecF f;
    if constexpr (D == DType::kFloat32) {
      std::memcpy(&f, base + i * 4, sizeof f);
    } else {
      for (int l = 0; l < kDeltaLanes; ++l) f[l] = DecodeScalarF<D>(base, i + l);
    }
    return __builtin_convertvector(f, DeltaVecD);
  }
}

template <DType D>
static inline double LoadDeltaScalar(const unsigned char* base, std::int64_t i) {
  if constexpr (D == DType::kFloat64) {
    return DecodeScalarD<D>(base, i);
  } else {
    return static_cast<double>(DecodeScalarF<D>(base, i));
  }
}

// The lane accumulators of pairs [0, whole) of a block.
struct DeltaLanes {
  DeltaVecD l1 = {}, l2sq = {}, amax = {};
  DeltaVecL changed = {}, nonfinite = {};  // -1 per counted pair, negated when folded
};

// The lanes folded in lane order, then the last n % 8 pairs one by one.
template <DType D>
static inline DeltaPartial FoldDeltaLanes(const unsigned char* x, const unsigned char* p,
                                          std::int64_t n, std::int64_t whole,
                                          const DeltaTolerance& tol, const DeltaLanes& a) {
  DeltaPartial acc = DeltaPartial::Identity();
  for (int l = 0; l < kDeltaLanes; ++l) {
    DeltaPartial lane;
    lane.count = static_cast<std::uint64_t>(whole / kDeltaLanes);
    lane.changed = static_cast<std::uint64_t>(-a.changed[l]);
    lane.nonfinite = static_cast<std::uint64_t>(-a.nonfinite[l]);
    lane.l1 = a.l1[l];
    lane.l2sq = a.l2sq[l];
    lane.amax = a.amax[l];
    acc = MergeDelta(acc, lane);
  }
  for (std::int64_t i = whole; i < n; ++i) {
    AddDeltaPair(LoadDeltaScalar<D>(x, i), LoadDeltaScalar<D>(p, i), tol, &acc);
  }
  return acc;
}

// kMasked false: every pair taken as finite, the arithmetic of the masked
// loop for finite pairs in the same lanes, without its finiteness masks
// (about half its work per pair); a pair with a NaN or an infinity makes its
// |x - p|, and so its lane's l1, NaN or infinite. kMasked true: a pair with a
// non-finite side adds d = +0, counts as non-finite, and as changed when its
// sides differ.
template <DType D, bool kMasked>
static inline DeltaLanes DeltaLoop(const unsigned char* x, const unsigned char* p,
                                   std::int64_t whole, const DeltaTolerance& tol) {
  const DeltaVecD zero = {};
  const DeltaVecD atol = zero + tol.atol;
  const DeltaVecD rtol = zero + tol.rtol;
  const DeltaVecL abs_mask = (DeltaVecL){} + static_cast<std::int64_t>(0x7fffffffffffffffLL);
  DeltaLanes a;
  for (std::int64_t i = 0; i < whole; i += kDeltaLanes) {
    const DeltaVecD xv = LoadDelta8<D>(x, i);
    const DeltaVecD pv = LoadDelta8<D>(p, i);
    DeltaVecD d = xv - pv;
    DeltaVecL fin = {};
    if constexpr (kMasked) {
      fin = (xv - xv == zero) & (pv - pv == zero);
      d = (DeltaVecD)((DeltaVecL)d & fin);
    }
    const DeltaVecD ad = (DeltaVecD)((DeltaVecL)d & abs_mask);
    const DeltaVecD ap = (DeltaVecD)((DeltaVecL)pv & abs_mask);
    const DeltaVecD limit = atol + rtol * ap;
    if constexpr (kMasked) {
      a.changed += (fin & (ad > limit)) | (~fin & (xv != pv));
      a.nonfinite += ~fin;
    } else {
      a.changed += ad > limit;
    }
    a.l1 += ad;
    a.l2sq += d * d;
    a.amax = ad > a.amax ? ad : a.amax;
  }
  return a;
}

// A block is first reduced as if every pair were finite, as nearly every
// block of weights is; a block with any l1 lane not finite (a NaN or an
// infinity, or float64 values whose sum overflows) is reduced again by the
// masked loop. The result has the masked loop's bits either way.
template <DType D>
__attribute__((flatten)) static DeltaPartial DeltaBlockVec(const unsigned char* x,
                                                           const unsigned char* p, std::int64_t n,
                                                           const DeltaTolerance& tol) {
  const std::int64_t whole = n - n % kDeltaLanes;
  DeltaLanes a = DeltaLoop<D, false>(x, p, whole, tol);
  const DeltaVecL finite = a.l1 - a.l1 == (DeltaVecD){};
  bool all_finite = true;
  for (int l = 0; l < kDeltaLanes; ++l) all_finite = all_finite && finite[l] != 0;
  if (!all_finite) a = DeltaLoop<D, true>(x, p, whole, tol);
  return FoldDeltaLanes<D>(x, p, n, whole, tol, a);
}
