// Encoders, decoders, host buffers and generators for test data (data.h).
//
// The narrow formats are handled by one parameterised routine working on the
// value (frexp/ldexp/nearbyint on doubles, all exact), not by reinterpreting
// float bits, so it shares no logic with kernels/dtype_decode.h.
#include "tests/support/data.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

namespace tstat::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A binary floating format with `exp_bits` exponent and `man_bits` fraction
// bits. IEEE-like formats reserve the all-ones exponent for Inf/NaN; the OCP
// e4m3 format has no Inf and only the all-ones pattern (S.1111.111) is NaN.
struct MiniFormat {
  int exp_bits;
  int man_bits;
  int bias;
  bool ieee_specials;  // false: e4m3 "fn"
  double max_finite;

  std::uint32_t exp_all() const { return (1u << exp_bits) - 1u; }
  std::uint32_t man_all() const { return (1u << man_bits) - 1u; }
  std::uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
  std::uint32_t nan_bits() const {
    return ieee_specials ? (exp_all() << man_bits) | (1u << (man_bits - 1))
                         : (exp_all() << man_bits) | man_all();
  }
  std::uint32_t inf_bits() const { return exp_all() << man_bits; }
  std::uint32_t max_bits() const {
    return ieee_specials ? ((exp_all() - 1u) << man_bits) | man_all()
                         : (exp_all() << man_bits) | (man_all() - 1u);
  }
};

const MiniFormat kF16{5, 10, 15, true, 65504.0};
const MiniFormat kBF16{8, 7, 127, true, 3.3895313892515355e38};  // (2 - 2^-7) * 2^127
const MiniFormat kE4M3{4, 3, 7, false, 448.0};
const MiniFormat kE5M2{5, 2, 15, true, 57344.0};

enum class Overflow { kToInf, kToNaN, kSaturate };

std::uint32_t EncodeMini(double x, const MiniFormat& f, Overflow overflow) {
  const std::uint32_t sign = std::signbit(x) ? f.sign_bit() : 0u;
  if (std::isnan(x)) return sign | f.nan_bits();
  const double a = std::fabs(x);
  auto overflowed = [&]() -> std::uint32_t {
    switch (overflow) {
      case Overflow::kToInf: return sign | f.inf_bits();
      case Overflow::kToNaN: return sign | f.nan_bits();
      case Overflow::kSaturate: return sign | f.max_bits();
    }
    return sign | f.nan_bits();
  };
  if (std::isinf(a)) return overflowed();
  if (a == 0.0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);     // a = m * 2^e2, m in [0.5, 1)
  const int e = e2 - 1;  // a in [2^e, 2^(e+1))
  const int emin = 1 - f.bias;
  // Spacing of representable values around a: 2^(max(e, emin) - man_bits).
  const int quantum_exp = std::max(e, emin) - f.man_bits;
  const double q = std::ldexp(a, -quantum_exp);  // exact: a power-of-two scaling
  const double r = std::nearbyint(q);            // ties to even (default rounding mode)
  if (std::ldexp(r, quantum_exp) > f.max_finite) return overflowed();
  const std::uint32_t ri = static_cast<std::uint32_t>(r);
  if (e < emin) return sign | ri;  // subnormal; ri == 2^man_bits is the min normal
  // Normal: r in [2^m, 2^(m+1)]; a carry into the next binade adds 1 to the exponent.
  return sign | ((static_cast<std::uint32_t>(e + f.bias) << f.man_bits) + (ri - (1u << f.man_bits)));
}

double DecodeMini(std::uint32_t bits, const MiniFormat& f) {
  const bool negative = (bits & f.sign_bit()) != 0;
  const std::uint32_t be = (bits >> f.man_bits) & f.exp_all();
  const std::uint32_t m = bits & f.man_all();
  double v;
  if (f.ieee_specials && be == f.exp_all()) {
    v = m == 0 ? kInf : kNaN;
  } else if (!f.ieee_specials && be == f.exp_all() && m == f.man_all()) {
    v = kNaN;
  } else if (be == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(m + (1u << f.man_bits)),
                   static_cast<int>(be) - f.bias - f.man_bits);
  }
  return negative ? -v : v;
}

template <class T>
T Load(const void* data, std::int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(data) + i * static_cast<std::int64_t>(sizeof(T)),
              sizeof(T));
  return v;
}

template <class T>
void Store(void* data, std::int64_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(data) + i * static_cast<std::int64_t>(sizeof(T)), &v,
              sizeof(T));
}

std::int64_t RoundClampInteger(double x, DType t) {
  if (!std::isfinite(x)) return 0;
  const double r = std::round(x);
  switch (t) {
    case DType::kInt32:
      return static_cast<std::int64_t>(std::clamp(r, -2147483648.0, 2147483647.0));
    case DType::kUInt8:
      return static_cast<std::int64_t>(std::clamp(r, 0.0, 255.0));
    case DType::kInt64:
      // 2^63 is not an int64; the largest double below it is 2^63 - 1024.
      if (r >= 9223372036854775808.0) return std::numeric_limits<std::int64_t>::max();
      if (r <= -9223372036854775808.0) return std::numeric_limits<std::int64_t>::min();
      return static_cast<std::int64_t>(r);
    default:
      return 0;
  }
}

void StoreValue(void* data, DType t, std::int64_t i, double v) {
  switch (t) {
    case DType::kFloat32: Store<float>(data, i, static_cast<float>(v)); break;
    case DType::kFloat64: Store<double>(data, i, v); break;
    case DType::kFloat16: Store<std::uint16_t>(data, i, EncodeF16(v)); break;
    case DType::kBFloat16: Store<std::uint16_t>(data, i, EncodeBF16(v)); break;
    case DType::kFloat8E4M3: Store<std::uint8_t>(data, i, EncodeF8E4M3(v)); break;
    case DType::kFloat8E5M2: Store<std::uint8_t>(data, i, EncodeF8E5M2(v)); break;
    case DType::kInt32:
      Store<std::int32_t>(data, i, static_cast<std::int32_t>(RoundClampInteger(v, t)));
      break;
    case DType::kInt64: Store<std::int64_t>(data, i, RoundClampInteger(v, t)); break;
    case DType::kUInt8:
      Store<std::uint8_t>(data, i, static_cast<std::uint8_t>(RoundClampInteger(v, t)));
      break;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
std::uint16_t EncodeF16(double x) {
  return static_cast<std::uint16_t>(EncodeMini(x, kF16, Overflow::kToInf));
}
std::uint16_t EncodeBF16(double x) {
  return static_cast<std::uint16_t>(EncodeMini(x, kBF16, Overflow::kToInf));
}
std::uint8_t EncodeF8E4M3(double x, Fp8Overflow overflow) {
  return static_cast<std::uint8_t>(EncodeMini(
      x, kE4M3, overflow == Fp8Overflow::kSaturate ? Overflow::kSaturate : Overflow::kToNaN));
}
std::uint8_t EncodeF8E5M2(double x, Fp8Overflow overflow) {
  return static_cast<std::uint8_t>(EncodeMini(
      x, kE5M2, overflow == Fp8Overflow::kSaturate ? Overflow::kSaturate : Overflow::kToInf));
}

double DecodeF16(std::uint16_t bits) { return DecodeMini(bits, kF16); }
double DecodeBF16(std::uint16_t bits) { return DecodeMini(bits, kBF16); }
double DecodeF8E4M3(std::uint8_t bits) { return DecodeMini(bits, kE4M3); }
double DecodeF8E5M2(std::uint8_t bits) { return DecodeMini(bits, kE5M2); }

double DecodeElement(const void* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<double>(Load<float>(data, i));
    case DType::kFloat64: return Load<double>(data, i);
    case DType::kFloat16: return DecodeF16(Load<std::uint16_t>(data, i));
    case DType::kBFloat16: return DecodeBF16(Load<std::uint16_t>(data, i));
    case DType::kFloat8E4M3: return DecodeF8E4M3(Load<std::uint8_t>(data, i));
    case DType::kFloat8E5M2: return DecodeF8E5M2(Load<std::uint8_t>(data, i));
    case DType::kInt32: return static_cast<double>(Load<std::int32_t>(data, i));
    case DType::kInt64: return static_cast<double>(Load<std::int64_t>(data, i));
    case DType::kUInt8: return static_cast<double>(Load<std::uint8_t>(data, i));
  }
  return kNaN;
}

std::int64_t DecodeIntegerElement(const void* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::kInt32: return Load<std::int32_t>(data, i);
    case DType::kInt64: return Load<std::int64_t>(data, i);
    case DType::kUInt8: return Load<std::uint8_t>(data, i);
    default: return 0;
  }
}

double MaxFinite(DType t) {
  switch (t) {
    case DType::kFloat32: return std::ldexp(2.0 - std::ldexp(1.0, -23), 127);
    case DType::kFloat64: return std::numeric_limits<double>::max();
    case DType::kFloat16: return kF16.max_finite;
    case DType::kBFloat16: return kBF16.max_finite;
    case DType::kFloat8E4M3: return kE4M3.max_finite;
    case DType::kFloat8E5M2: return kE5M2.max_finite;
    case DType::kInt32: return 2147483647.0;
    case DType::kInt64: return 9223372036854775807.0;
    case DType::kUInt8: return 255.0;
  }
  return 0.0;
}

double MinNormal(DType t) {
  switch (t) {
    case DType::kFloat32: return std::ldexp(1.0, -126);
    case DType::kFloat64: return std::ldexp(1.0, -1022);
    case DType::kFloat16: return std::ldexp(1.0, 1 - kF16.bias);
    case DType::kBFloat16: return std::ldexp(1.0, 1 - kBF16.bias);
    case DType::kFloat8E4M3: return std::ldexp(1.0, 1 - kE4M3.bias);
    case DType::kFloat8E5M2: return std::ldexp(1.0, 1 - kE5M2.bias);
    default: return 0.0;
  }
}

int MantissaBits(DType t) {
  switch (t) {
    case DType::kFloat32: return 23;
    case DType::kFloat64: return 52;
    case DType::kFloat16: return kF16.man_bits;
    case DType::kBFloat16: return kBF16.man_bits;
    case DType::kFloat8E4M3: return kE4M3.man_bits;
    case DType::kFloat8E5M2: return kE5M2.man_bits;
    default: return 0;
  }
}

double MinSubnormal(DType t) {
  if (!IsFloatingDType(t)) return 0.0;
  return std::ldexp(MinNormal(t), -MantissaBits(t));
}

double RoundToDType(double x, DType t) {
  HostTensor one(t, 1);
  StoreValue(one.data(), t, 0, x);
  return one.Value(0);
}

std::vector<DType> AllDTypes() {
  std::vector<DType> v;
  for (int i = 0; i < kNumDTypes; ++i) v.push_back(static_cast<DType>(i));
  return v;
}
std::vector<DType> FloatDTypes() {
  std::vector<DType> v;
  for (DType t : AllDTypes()) {
    if (IsFloatingDType(t)) v.push_back(t);
  }
  return v;
}
std::vector<DType> IntegerDTypes() {
  std::vector<DType> v;
  for (DType t : AllDTypes()) {
    if (IsIntegerDType(t)) v.push_back(t);
  }
  return v;
}

// ---------------------------------------------------------------------------
HostTensor::HostTensor(DType dtype, std::int64_t numel, std::vector<std::int64_t> shape,
                       std::size_t byte_offset)
    : dtype_(dtype), numel_(numel), shape_(std::move(shape)), byte_offset_(byte_offset) {
  if (numel < 0) throw std::invalid_argument("HostTensor: negative numel");
  if (byte_offset >= 64) throw std::invalid_argument("HostTensor: byte_offset must be < 64");
  const std::size_t size = static_cast<std::size_t>(numel) * DTypeSize(dtype);
  const std::size_t total = size + 64 + 64;
  storage_.reset(new unsigned char[total]);
  std::memset(storage_.get(), 0xA5, total);  // not zero: stray reads show up as odd values
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(storage_.get());
  const std::uintptr_t aligned = (base + 63) & ~static_cast<std::uintptr_t>(63);
  data_ = storage_.get() + (aligned - base) + byte_offset;
}

TensorView HostTensor::View() const {
  TensorView v;
  v.data = data_;
  v.dtype = dtype_;
  v.numel = numel_;
  v.shape = shape_;
  v.space = MemorySpace::kHost;
  return v;
}

double HostTensor::Value(std::int64_t i) const { return DecodeElement(data_, dtype_, i); }

HostTensor MakeTensor(DType dtype, const std::vector<double>& values,
                      std::vector<std::int64_t> shape, std::size_t byte_offset) {
  HostTensor t(dtype, static_cast<std::int64_t>(values.size()), std::move(shape), byte_offset);
  for (std::size_t i = 0; i < values.size(); ++i) {
    StoreValue(t.data(), dtype, static_cast<std::int64_t>(i), values[i]);
  }
  return t;
}

HostTensor MakeIntegerTensor(DType dtype, const std::vector<std::int64_t>& values,
                             std::vector<std::int64_t> shape, std::size_t byte_offset) {
  if (!IsIntegerDType(dtype)) throw std::invalid_argument("MakeIntegerTensor: not an integer dtype");
  HostTensor t(dtype, static_cast<std::int64_t>(values.size()), std::move(shape), byte_offset);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto k = static_cast<std::int64_t>(i);
    switch (dtype) {
      case DType::kInt32: Store<std::int32_t>(t.data(), k, static_cast<std::int32_t>(values[i])); break;
      case DType::kInt64: Store<std::int64_t>(t.data(), k, values[i]); break;
      default: Store<std::uint8_t>(t.data(), k, static_cast<std::uint8_t>(values[i])); break;
    }
  }
  return t;
}

HostTensor MakeBitsTensor(DType dtype, const std::vector<std::uint64_t>& bits,
                          std::vector<std::int64_t> shape, std::size_t byte_offset) {
  HostTensor t(dtype, static_cast<std::int64_t>(bits.size()), std::move(shape), byte_offset);
  const std::size_t w = DTypeSize(dtype);
  auto* out = static_cast<unsigned char*>(t.data());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    for (std::size_t b = 0; b < w; ++b) {
      out[i * w + b] = static_cast<unsigned char>(bits[i] >> (8 * b));  // little-endian
    }
  }
  return t;
}

HostTensor WithOffset(const HostTensor& t, std::size_t byte_offset) {
  HostTensor r(t.dtype(), t.numel(), t.shape(), byte_offset);
  if (t.bytes() > 0) std::memcpy(r.data(), t.data(), t.bytes());
  return r;
}

// ---------------------------------------------------------------------------
std::vector<double> GenerateValues(DType dtype, std::int64_t n, const Distribution& dist,
                                   const ValueMix& mix, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> normal(dist.a, dist.b);
  std::uniform_real_distribution<double> uniform(dist.a, dist.b);
  const bool is_float = IsFloatingDType(dtype);
  const double max_finite = MaxFinite(dtype);
  const double min_value = dtype == DType::kUInt8 ? 0.0 : -max_finite;
  const int man_bits = MantissaBits(dtype);
  std::vector<double> out(static_cast<std::size_t>(n));
  for (auto& v : out) {
    double u = unit(rng);
    if (is_float) {
      if ((u -= mix.nan) < 0) { v = kNaN; continue; }
      if ((u -= mix.pos_inf) < 0) { v = kInf; continue; }
      if ((u -= mix.neg_inf) < 0) { v = -kInf; continue; }
    }
    if ((u -= mix.pos_zero) < 0) { v = 0.0; continue; }
    if ((u -= mix.neg_zero) < 0) { v = is_float ? -0.0 : 0.0; continue; }
    if (is_float && (u -= mix.subnormal) < 0) {
      // m * 2^(emin - man_bits) with 1 <= m < 2^man_bits.
      const std::uint64_t span = (std::uint64_t{1} << man_bits) - 1;
      const std::uint64_t m = 1 + rng() % span;
      const double s = std::ldexp(static_cast<double>(m), -man_bits) * MinNormal(dtype);
      v = (rng() & 1) ? -s : s;
      continue;
    }
    const double x = dist.kind == Distribution::Kind::kNormal ? normal(rng) : uniform(rng);
    v = std::clamp(x, min_value, max_finite);
  }
  return out;
}

HostTensor GenerateTensor(DType dtype, std::int64_t n, const Distribution& dist,
                          const ValueMix& mix, std::uint64_t seed, std::vector<std::int64_t> shape,
                          std::size_t byte_offset) {
  return MakeTensor(dtype, GenerateValues(dtype, n, dist, mix, seed), std::move(shape),
                    byte_offset);
}

HostTensor GenerateDefaultTensor(DType dtype, std::int64_t n, std::uint64_t seed,
                                 std::vector<std::int64_t> shape, std::size_t byte_offset) {
  switch (dtype) {
    case DType::kInt32: {
      ValueMix mix;
      mix.pos_zero = 0.05;
      return GenerateTensor(dtype, n, Distribution::Normal(3.0, 2000.0), mix, seed,
                            std::move(shape), byte_offset);
    }
    case DType::kInt64: {
      // Mostly moderate values, some close to +-2^62 (not exact in double).
      std::vector<double> a = GenerateValues(dtype, n, Distribution::Normal(-7.0, 1e6), {}, seed);
      std::mt19937_64 rng(seed ^ 0x5eed);
      std::vector<std::int64_t> v(a.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        v[i] = static_cast<std::int64_t>(a[i]);
        if (rng() % 50 == 0) {
          const std::int64_t big = static_cast<std::int64_t>(rng() >> 2) | 1;  // < 2^62, odd
          v[i] = (rng() & 1) ? big : -big;
        }
      }
      return MakeIntegerTensor(dtype, v, std::move(shape), byte_offset);
    }
    case DType::kUInt8:
      return GenerateTensor(dtype, n, Distribution::Uniform(-0.49, 255.49), {}, seed,
                            std::move(shape), byte_offset);
    default:
      return GenerateTensor(dtype, n, Distribution::Normal(0.25, 2.0), ValueMix::Specials(), seed,
                            std::move(shape), byte_offset);
  }
}

Tolerance ToleranceFor(DType t) {
  switch (t) {
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
      return {1e-9, 0.0};  // double path: every step in double
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
      return {5e-7, 0.0};  // float path: deviations may be formed in float
  }
  return {1e-9, 0.0};
}

bool QuickMode() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(undefined_behavior_sanitizer) || __has_feature(memory_sanitizer)
  return true;
#endif
#endif
  const char* env = std::getenv("TSTAT_TEST_QUICK");
  return env != nullptr && env[0] != '\0' && env[0] != '0';
#endif
}

std::string DTypeLabel(DType t) {
  if (!IsValidDType(t)) return "dtype(" + std::to_string(static_cast<int>(t)) + ")";
  return DTypeName(t);
}

}  // namespace tstat::testing
