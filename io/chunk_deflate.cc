// See chunk_deflate.h.
#include "io/chunk_deflate.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace tstat::io {

ChunkDeflater::~ChunkDeflater() {
  if (compressor_) libdeflate_free_compressor(compressor_);
}

void ShuffleBytes(const std::uint8_t* in, std::size_t bytes, std::size_t element_size,
                  std::uint8_t* out) {
  const std::size_t n = element_size ? bytes / element_size : 0;
  if (element_size <= 1 || n <= 1) {
    if (bytes) std::memcpy(out, in, bytes);
    return;
  }
  // Blocks of elements small enough to stay in L1 while each of their byte
  // columns is written out contiguously.
  constexpr std::size_t kBlock = 64;
  for (std::size_t i0 = 0; i0 < n; i0 += kBlock) {
    const std::size_t i1 = std::min(n, i0 + kBlock);
    for (std::size_t j = 0; j < element_size; ++j) {
      const std::uint8_t* src = in + i0 * element_size + j;
      std::uint8_t* dst = out + j * n + i0;
      for (std::size_t i = i0; i < i1; ++i, src += element_size) *dst++ = *src;
    }
  }
  const std::size_t tail = bytes - n * element_size;  // left as is by HDF5
  if (tail) std::memcpy(out + n * element_size, in + n * element_size, tail);
}

Result<ChunkDeflater::Output> ChunkDeflater::ShuffleDeflate(const void* data, std::size_t bytes,
                                                           std::size_t element_size, int level) {
  if (shuffled_.size() < bytes) shuffled_.resize(bytes);
  ShuffleBytes(static_cast<const std::uint8_t*>(data), bytes, element_size, shuffled_.data());
  return Deflate(shuffled_.data(), bytes, level);
}

std::uint8_t* ChunkDeflater::InputBuffer(std::size_t bytes) {
  if (input_.size() < bytes) input_.resize(bytes);
  return input_.data();
}

Result<ChunkDeflater::Output> ChunkDeflater::Deflate(const void* shuffled, std::size_t bytes,
                                                     int level) {
  if (level < 1 || level > 9) {
    return Status::InvalidArgument("deflate level " + std::to_string(level) + " is not 1..9");
  }
  if (compressor_ == nullptr || level_ != level) {
    if (compressor_) libdeflate_free_compressor(compressor_);
    compressor_ = libdeflate_alloc_compressor(level);
    level_ = compressor_ ? level : -1;
    if (compressor_ == nullptr) return Status::ResourceExhausted("libdeflate: out of memory");
  }
  const std::size_t bound = libdeflate_zlib_compress_bound(compressor_, bytes);
  if (out_.size() < bound) out_.resize(bound);
  const std::size_t size =
      libdeflate_zlib_compress(compressor_, shuffled, bytes, out_.data(), out_.size());
  if (size == 0) return Status::Internal("libdeflate: compressed chunk exceeds its bound");
  return Output{out_.data(), size};
}

}  // namespace tstat::io
