// Benchmark input: an aligned host buffer of one dtype, filled either with
// deterministic pseudo-random normal-ish values or with the raw bytes of a file.
//
// The generated values approximate N(0, 1) by the Irwin-Hall sum of four
// uniforms (scaled to unit variance): fast, deterministic for a given element
// index whatever the thread count, and with a realistic spread of exponents.
// Thread safety: a HostBuffer is owned by one thread; Generate*/Read* return
// new buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tstat/dtype.h"
#include "tstat/status.h"

namespace tstat::bench {

// 64-byte aligned bytes holding `elements` values of `dtype`.
class HostBuffer {
 public:
  HostBuffer() = default;
  // Allocates (uninitialized). kResourceExhausted when the allocation fails.
  static Result<HostBuffer> Allocate(DType dtype, std::int64_t elements);

  DType dtype() const { return dtype_; }
  std::int64_t elements() const { return elements_; }
  std::size_t bytes() const { return bytes_; }
  const void* data() const { return data_.get(); }
  void* mutable_data() { return data_.get(); }

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  DType dtype_ = DType::kFloat32;
  std::int64_t elements_ = 0;
  std::size_t bytes_ = 0;
  std::unique_ptr<void, FreeDeleter> data_;
};

// `elements` normal-ish values (mean 0, std 1) of a floating `dtype`, rounded
// to nearest-even from double. Element i depends only on (seed, i).
// kInvalidArgument for a non-floating dtype or a negative count.
Result<HostBuffer> GenerateNormal(DType dtype, std::int64_t elements, std::uint64_t seed = 1);

// Reads the whole of `path` as raw little-endian values of `dtype`.
// kIoError when the file cannot be read, kInvalidArgument when it is empty or
// its size is not a multiple of the element size.
Result<HostBuffer> ReadRawFile(const std::string& path, DType dtype);

// Round-to-nearest-even conversions used by the generator.
std::uint16_t FloatToHalfBits(float x);
std::uint16_t FloatToBFloat16Bits(float x);

}  // namespace tstat::bench
