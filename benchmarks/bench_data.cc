// Benchmark input buffers: allocation, the normal-ish generator, raw files.
#include "benchmarks/bench_data.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace tstat::bench {
namespace {

constexpr std::size_t kAlignment = 64;

std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Irwin-Hall(4) from two 64-bit hashes: four 32-bit uniforms in [0, 1), summed,
// centred (mean 2) and scaled by sqrt(12/4) to unit variance.
double NormalishAt(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t a = SplitMix64(seed ^ (2 * i));
  const std::uint64_t b = SplitMix64(seed ^ (2 * i + 1));
  constexpr double kScale = 1.0 / 4294967296.0;  // 2^-32
  const double s = static_cast<double>(a >> 32) + static_cast<double>(a & 0xffffffffu) +
                   static_cast<double>(b >> 32) + static_cast<double>(b & 0xffffffffu);
  return (s * kScale - 2.0) * 1.7320508075688772;
}

std::uint32_t BitsOf(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

template <class Store>
void Fill(std::int64_t n, std::uint64_t seed, Store store) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) store(i, NormalishAt(seed, static_cast<std::uint64_t>(i)));
}

}  // namespace

void HostBuffer::FreeDeleter::operator()(void* p) const { std::free(p); }

Result<HostBuffer> HostBuffer::Allocate(DType dtype, std::int64_t elements) {
  if (elements < 0) return Status::InvalidArgument("element count is negative");
  HostBuffer b;
  b.dtype_ = dtype;
  b.elements_ = elements;
  b.bytes_ = static_cast<std::size_t>(elements) * DTypeSize(dtype);
  // aligned_alloc needs a size that is a multiple of the alignment.
  const std::size_t padded = (b.bytes_ + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, padded == 0 ? kAlignment : padded);
  if (p == nullptr) {
    return Status::ResourceExhausted("cannot allocate " + std::to_string(b.bytes_) +
                                     " bytes for the benchmark data");
  }
  b.data_.reset(p);
  return b;
}

std::uint16_t FloatToHalfBits(float x) {
  const std::uint32_t u = BitsOf(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to Inf
  if (abs < 0x38800000u) {
    // Half subnormal (or zero): value / 2^-24, rounded to nearest even. The
    // product is exact in float and below 2^10, so nearbyint rounds it.
    float mag;
    std::memcpy(&mag, &abs, sizeof mag);
    const float q = std::nearbyint(mag * 16777216.0f);  // 2^24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(q));
  }
  // Normal: rebias the exponent (127 -> 15) and round 23 -> 10 mantissa bits.
  const std::uint32_t rebased = abs - (112u << 23);
  const std::uint32_t round = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rebased + round) >> 13));
}

std::uint16_t FloatToBFloat16Bits(float x) {
  const std::uint32_t u = BitsOf(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const std::uint32_t round = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + round) >> 16);
}

Result<HostBuffer> GenerateNormal(DType dtype, std::int64_t elements, std::uint64_t seed) {
  if (!IsFloatingDType(dtype) || DTypeSize(dtype) < 2) {
    return Status::InvalidArgument(
        std::string("the generator supports f32, f16, bf16 and f64, not ") + DTypeName(dtype));
  }
  TSTAT_ASSIGN_OR_RETURN(HostBuffer buffer, HostBuffer::Allocate(dtype, elements));
  void* out = buffer.mutable_data();
  switch (dtype) {
    case DType::kFloat32: {
      auto* p = static_cast<float*>(out);
      Fill(elements, seed, [p](std::int64_t i, double v) { p[i] = static_cast<float>(v); });
      break;
    }
    case DType::kFloat64: {
      auto* p = static_cast<double*>(out);
      Fill(elements, seed, [p](std::int64_t i, double v) { p[i] = v; });
      break;
    }
    case DType::kFloat16: {
      auto* p = static_cast<std::uint16_t*>(out);
      Fill(elements, seed,
           [p](std::int64_t i, double v) { p[i] = FloatToHalfBits(static_cast<float>(v)); });
      break;
    }
    case DType::kBFloat16: {
      auto* p = static_cast<std::uint16_t*>(out);
      Fill(elements, seed,
           [p](std::int64_t i, double v) { p[i] = FloatToBFloat16Bits(static_cast<float>(v)); });
      break;
    }
    default:
      return Status::Internal("unreachable dtype in GenerateNormal");
  }
  return buffer;
}

Result<HostBuffer> ReadRawFile(const std::string& path, DType dtype) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::IoError("cannot open " + path + ": " + std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  if (std::fseek(f, 0, SEEK_END) != 0) return Status::IoError("cannot seek in " + path);
  const long size = std::ftell(f);  // NOLINT(runtime/int): ftell's type
  if (size < 0) return Status::IoError("cannot get the size of " + path);
  std::rewind(f);
  const std::size_t elem = DTypeSize(dtype);
  if (size == 0) return Status::InvalidArgument(path + " is empty");
  if (static_cast<std::size_t>(size) % elem != 0) {
    return Status::InvalidArgument(path + " has " + std::to_string(size) +
                                   " bytes, not a multiple of the " + DTypeName(dtype) +
                                   " element size " + std::to_string(elem));
  }
  TSTAT_ASSIGN_OR_RETURN(HostBuffer buffer,
                         HostBuffer::Allocate(dtype, static_cast<std::int64_t>(size / elem)));
  if (std::fread(buffer.mutable_data(), 1, buffer.bytes(), f) != buffer.bytes()) {
    return Status::IoError("short read from " + path);
  }
  return buffer;
}

}  // namespace tstat::bench
