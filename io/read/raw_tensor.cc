// RawTensor::ToDoubles (tstat/trial.h): decodes the stored little-endian
// elements of every dtype, written from the format definitions (IEEE 754
// binary16, bfloat16 = the top half of binary32, OCP FP8 E4M3 "fn" and E5M2).
#include <cmath>
#include <cstring>
#include <limits>

#include "tstat/trial.h"

namespace tstat {
namespace {

template <class T>
T Load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A binary floating format with `exp_bits` exponent and `man_bits` fraction
// bits. `ieee_special`: the all-ones exponent means Inf/NaN (else only the
// all-ones pattern is NaN, as in E4M3 "fn").
double DecodeMinifloat(std::uint32_t bits, int exp_bits, int man_bits, bool ieee_special) {
  const bool negative = (bits >> (exp_bits + man_bits)) & 1u;
  const std::uint32_t exp = (bits >> man_bits) & ((1u << exp_bits) - 1);
  const std::uint32_t man = bits & ((1u << man_bits) - 1);
  const int bias = (1 << (exp_bits - 1)) - 1;
  const std::uint32_t max_exp = (1u << exp_bits) - 1;
  double value;
  if (ieee_special && exp == max_exp) {
    value =
        man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!ieee_special && exp == max_exp && man == (1u << man_bits) - 1) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    value = std::ldexp(static_cast<double>(man), 1 - bias - man_bits);
  } else {
    value = std::ldexp(static_cast<double>(man | (1u << man_bits)),
                       static_cast<int>(exp) - bias - man_bits);
  }
  return negative ? -value : value;
}

}  // namespace

std::vector<double> RawTensor::ToDoubles() const {
  const std::size_t size = DTypeSize(dtype);
  const std::size_t n = size ? bytes.size() / size : 0;
  std::vector<double> out(n);
  const std::uint8_t* p = bytes.data();
  for (std::size_t i = 0; i < n; ++i, p += size) {
    switch (dtype) {
      case DType::kFloat32:
        out[i] = Load<float>(p);
        break;
      case DType::kFloat64:
        out[i] = Load<double>(p);
        break;
      case DType::kFloat16:
        out[i] = DecodeMinifloat(Load<std::uint16_t>(p), 5, 10, true);
        break;
      case DType::kBFloat16: {
        const std::uint32_t word = static_cast<std::uint32_t>(Load<std::uint16_t>(p)) << 16;
        float f;
        std::memcpy(&f, &word, sizeof(f));
        out[i] = f;
        break;
      }
      case DType::kFloat8E4M3:
        out[i] = DecodeMinifloat(*p, 4, 3, false);
        break;
      case DType::kFloat8E5M2:
        out[i] = DecodeMinifloat(*p, 5, 2, true);
        break;
      case DType::kInt32:
        out[i] = Load<std::int32_t>(p);
        break;
      case DType::kInt64:
        out[i] = static_cast<double>(Load<std::int64_t>(p));
        break;
      case DType::kUInt8:
        out[i] = *p;
        break;
    }
  }
  return out;
}

}  // namespace tstat
