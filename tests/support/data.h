// Test data for tstat: encoders and decoders of the narrow floating types,
// host buffers at chosen byte offsets, seeded generators, and the tolerance
// table used when a backend's floating-point stats are compared with the
// reference.
//
// Everything here is written from the format definitions (IEEE 754 binary16,
// bfloat16, OCP FP8 E4M3 "fn" and E5M2), independently of kernels/: the
// reference (tests/support/reference.h) decodes tensors with these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tstat/dtype.h"
#include "tstat/tensor_view.h"

namespace tstat::testing {

// ---------------------------------------------------------------------------
// Encoders: double -> bit pattern, round to nearest, ties to even, straight
// from the double (no intermediate float, so no double rounding). Subnormals
// are produced where the format has them; NaN keeps its sign and becomes the
// canonical quiet NaN of the format (f16 0x7E00, bf16 0x7FC0, e4m3 0x7F,
// e5m2 0x7E).
std::uint16_t EncodeF16(double x);   // overflow -> +-Inf (IEEE)
std::uint16_t EncodeBF16(double x);  // overflow -> +-Inf (IEEE)

// What an FP8 encoder does with a value whose rounded magnitude exceeds the
// largest finite value (448 for e4m3, 57344 for e5m2), and with +-Inf.
enum class Fp8Overflow {
  kNonSaturating,  // e4m3: NaN (it has no infinity); e5m2: +-Inf. The default,
                   // as a plain cast in PyTorch / ml_dtypes does.
  kSaturate,       // +-max finite (Inf input too)
};
std::uint8_t EncodeF8E4M3(double x, Fp8Overflow overflow = Fp8Overflow::kNonSaturating);
std::uint8_t EncodeF8E5M2(double x, Fp8Overflow overflow = Fp8Overflow::kNonSaturating);

// Decoders: bit pattern -> exact value as double (every value of these
// formats is a double). NaN patterns give a quiet NaN with the pattern's sign.
double DecodeF16(std::uint16_t bits);
double DecodeBF16(std::uint16_t bits);
double DecodeF8E4M3(std::uint8_t bits);
double DecodeF8E5M2(std::uint8_t bits);

// Element i of a tensor of `dtype` at `data` (any alignment), decoded
// exactly: floating dtypes to their value, integers converted to double (the
// documented stat-set conversion; i64 beyond 2^53 rounds). NaN stays NaN.
double DecodeElement(const void* data, DType dtype, std::int64_t i);
// Element i of an integer tensor, exactly.
std::int64_t DecodeIntegerElement(const void* data, DType dtype, std::int64_t i);

// Facts about a dtype, from its format definition. Integer dtypes: MinNormal
// and MinSubnormal are 0 (there are no subnormals), MaxFinite is the largest
// integer (as double).
double MaxFinite(DType t);
double MinNormal(DType t);
double MinSubnormal(DType t);
int MantissaBits(DType t);  // stored fraction bits (0 for integers)

// The value a double becomes when stored as `t` (integers: rounded half away
// from zero and clamped; NaN/Inf become 0 there).
double RoundToDType(double x, DType t);

// Every dtype; the floating ones; the integer ones.
std::vector<DType> AllDTypes();
std::vector<DType> FloatDTypes();
std::vector<DType> IntegerDTypes();

// ---------------------------------------------------------------------------
// HostTensor: encoded elements in 64-byte-aligned host storage, starting
// `byte_offset` bytes after the aligned address (0..63), so tests can hand the
// backend element-aligned and misaligned pointers. Copies share the storage.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::int64_t numel, std::vector<std::int64_t> shape = {},
             std::size_t byte_offset = 0);

  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return numel_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t byte_offset() const { return byte_offset_; }
  std::size_t bytes() const { return static_cast<std::size_t>(numel_) * DTypeSize(dtype_); }
  void* data() { return data_; }
  const void* data() const { return data_; }

  // A host TensorView of the data (shape included).
  TensorView View() const;
  // Element i decoded (DecodeElement).
  double Value(std::int64_t i) const;

 private:
  DType dtype_ = DType::kFloat32;
  std::int64_t numel_ = 0;
  std::vector<std::int64_t> shape_;
  std::size_t byte_offset_ = 0;
  std::shared_ptr<unsigned char[]> storage_;
  unsigned char* data_ = nullptr;
};

// Encodes `values` as `dtype` (floating: the encoders above, fp8
// non-saturating; integers: RoundToDType).
HostTensor MakeTensor(DType dtype, const std::vector<double>& values,
                      std::vector<std::int64_t> shape = {}, std::size_t byte_offset = 0);
// Integer tensor from exact integers (i64 values beyond 2^53 stay exact).
HostTensor MakeIntegerTensor(DType dtype, const std::vector<std::int64_t>& values,
                             std::vector<std::int64_t> shape = {}, std::size_t byte_offset = 0);
// Raw bit patterns: the low DTypeSize(dtype) bytes of each entry.
HostTensor MakeBitsTensor(DType dtype, const std::vector<std::uint64_t>& bits,
                          std::vector<std::int64_t> shape = {}, std::size_t byte_offset = 0);
// Same elements at another byte offset.
HostTensor WithOffset(const HostTensor& t, std::size_t byte_offset);

// ---------------------------------------------------------------------------
// Seeded generators (std::mt19937_64).
struct Distribution {
  enum class Kind { kNormal, kUniform };
  Kind kind = Kind::kNormal;
  double a = 0.0, b = 1.0;  // normal: mean, stddev; uniform: lo, hi
  static Distribution Normal(double mean, double stddev) { return {Kind::kNormal, mean, stddev}; }
  static Distribution Uniform(double lo, double hi) { return {Kind::kUniform, lo, hi}; }
};

// Per-element probabilities of special values (the rest come from the
// distribution, clamped to the dtype's finite range). Subnormals are exact
// subnormals of the target dtype with random sign. Integer dtypes ignore
// nan/inf/subnormal rates.
struct ValueMix {
  double nan = 0.0;
  double pos_inf = 0.0;
  double neg_inf = 0.0;
  double pos_zero = 0.0;
  double neg_zero = 0.0;
  double subnormal = 0.0;
  static ValueMix Specials() { return {0.01, 0.005, 0.005, 0.01, 0.01, 0.01}; }
};

std::vector<double> GenerateValues(DType dtype, std::int64_t n, const Distribution& dist,
                                   const ValueMix& mix, std::uint64_t seed);
HostTensor GenerateTensor(DType dtype, std::int64_t n, const Distribution& dist,
                          const ValueMix& mix, std::uint64_t seed,
                          std::vector<std::int64_t> shape = {}, std::size_t byte_offset = 0);
// A convenient default per dtype: normal(0.25, 2) for floats (with Specials()),
// a wide spread for integers (i64 includes magnitudes up to 2^62).
HostTensor GenerateDefaultTensor(DType dtype, std::int64_t n, std::uint64_t seed,
                                 std::vector<std::int64_t> shape = {}, std::size_t byte_offset = 0);

// ---------------------------------------------------------------------------
// Tolerance for the floating-point stats (sum, mean, m2, l1, l2) of a backend
// against the long-double reference: |got - ref| <= atol + rtol * scale, where
// scale is max(|ref|, the stat's condition scale) -- e.g. sum(|x|) for the sum,
// so a sum that cancels to ~0 is judged against the magnitudes that produced
// it (see compare.h). min/max/amax are exact values of elements and compare
// exactly; counts and histograms compare exactly.
//
// float64 and the integer types: 1e-9 (the stat set is computed in double
// throughout; any summation order over 3e6 elements stays far inside it).
// float32/16, bfloat16, fp8 ("float-path" dtypes): 5e-7, half the 1e-6
// cross-backend contract, so two backends each within it agree: a backend
// may form x - shift (and short block sums) in float for these, where one
// rounding costs 2^-24 relative.
struct Tolerance {
  double rtol = 1e-9;
  double atol = 0.0;
};
Tolerance ToleranceFor(DType t);

// ---------------------------------------------------------------------------
// True in sanitizer builds or when TSTAT_TEST_QUICK=1: suites shrink their
// largest inputs.
bool QuickMode();

std::string DTypeLabel(DType t);  // "f32", or "dtype(99)" for invalid values

}  // namespace tstat::testing
