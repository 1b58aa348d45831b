// See chunk_deflate.h.
#include "io/codec/chunk_deflate.h"

#include <libdeflate.h>
#if defined(__SSE2__)
#include <emmintrin.h>  // part of every x86-64 CPU
#endif

#include <algorithm>
#include <cstring>
#include <string>

namespace tstat::io {

ChunkDeflater::~ChunkDeflater() {
  if (compressor_) libdeflate_free_compressor(compressor_);
}

namespace {

#if defined(__SSE2__)
// Columns [j, j + 8) of elements [i, i + 16): sixteen 8-byte loads, an SSE2
// byte transpose (unpack 8 -> 16 -> 32 -> 64 bits), eight 16-byte stores.
inline void Transpose16x8(const std::uint8_t* in, std::size_t element_size, std::size_t i,
                          std::size_t j, std::size_t n, std::uint8_t* out) {
  const std::uint8_t* p = in + i * element_size + j;
  __m128i r[16];
  for (int e = 0; e < 16; ++e) {
    r[e] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + e * element_size));
  }
  __m128i c[2][4];
  for (int h = 0; h < 2; ++h) {  // elements 0..7, then 8..15
    const __m128i* q = r + 8 * h;
    const __m128i a0 = _mm_unpacklo_epi8(q[0], q[1]);
    const __m128i a1 = _mm_unpacklo_epi8(q[2], q[3]);
    const __m128i a2 = _mm_unpacklo_epi8(q[4], q[5]);
    const __m128i a3 = _mm_unpacklo_epi8(q[6], q[7]);
    const __m128i b0 = _mm_unpacklo_epi16(a0, a1);  // columns 0..3 of elements 0..3
    const __m128i b1 = _mm_unpackhi_epi16(a0, a1);  // columns 4..7 of elements 0..3
    const __m128i b2 = _mm_unpacklo_epi16(a2, a3);  // columns 0..3 of elements 4..7
    const __m128i b3 = _mm_unpackhi_epi16(a2, a3);
    c[h][0] = _mm_unpacklo_epi32(b0, b2);  // column 0 | column 1, elements 0..7
    c[h][1] = _mm_unpackhi_epi32(b0, b2);  // column 2 | column 3
    c[h][2] = _mm_unpacklo_epi32(b1, b3);  // column 4 | column 5
    c[h][3] = _mm_unpackhi_epi32(b1, b3);  // column 6 | column 7
  }
  std::uint8_t* d = out + j * n + i;
  for (int k = 0; k < 4; ++k) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (2 * k) * n),
                     _mm_unpacklo_epi64(c[0][k], c[1][k]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (2 * k + 1) * n),
                     _mm_unpackhi_epi64(c[0][k], c[1][k]));
  }
}

// The inverse: planes [j, j + 8) at elements [i, i + 16) (eight 16-byte
// loads) to bytes [at, at + 8) of those elements' rows of `stride` bytes in
// `out` (sixteen 8-byte stores).
inline void Untranspose8x16(const std::uint8_t* in, std::size_t i, std::size_t j, std::size_t n,
                            std::size_t stride, std::size_t at, std::uint8_t* out) {
  const std::size_t element_size = stride;
  const std::uint8_t* p = in + j * n + i;
  __m128i plane[8];
  for (int k = 0; k < 8; ++k) {
    plane[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + k * n));
  }
  std::uint8_t* d = out + i * element_size + at;
  for (int h = 0; h < 2; ++h) {  // elements 0..7, then 8..15
    __m128i a[4];
    for (int k = 0; k < 4; ++k) {
      a[k] = h == 0 ? _mm_unpacklo_epi8(plane[2 * k], plane[2 * k + 1])
                    : _mm_unpackhi_epi8(plane[2 * k], plane[2 * k + 1]);
    }
    const __m128i b0 = _mm_unpacklo_epi16(a[0], a[1]);  // planes 0..3 of elements 0..3
    const __m128i b1 = _mm_unpackhi_epi16(a[0], a[1]);  // planes 0..3 of elements 4..7
    const __m128i b2 = _mm_unpacklo_epi16(a[2], a[3]);  // planes 4..7 of elements 0..3
    const __m128i b3 = _mm_unpackhi_epi16(a[2], a[3]);
    const __m128i c[4] = {_mm_unpacklo_epi32(b0, b2),   // elements 0 | 1
                          _mm_unpackhi_epi32(b0, b2),   // elements 2 | 3
                          _mm_unpacklo_epi32(b1, b3),   // elements 4 | 5
                          _mm_unpackhi_epi32(b1, b3)};  // elements 6 | 7
    std::uint8_t* e = d + static_cast<std::size_t>(8 * h) * element_size;
    for (int k = 0; k < 4; ++k) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(e + (2 * k) * element_size), c[k]);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(e + (2 * k + 1) * element_size),
                       _mm_unpackhi_epi64(c[k], c[k]));
    }
  }
}
#endif

}  // namespace

void ShuffleBytes(const std::uint8_t* in, std::size_t bytes, std::size_t element_size,
                  std::uint8_t* out) {
  const std::size_t n = element_size ? bytes / element_size : 0;
  if (element_size <= 1 || n <= 1) {
    if (bytes) std::memcpy(out, in, bytes);
    return;
  }
  // Whole groups of 16 elements x 8 columns by SSE2; the last element_size % 8
  // columns and the last n % 16 elements byte by byte.
  const std::size_t n16 = n / 16 * 16;
#if defined(__SSE2__)
  const std::size_t j8 = element_size / 8 * 8;
#else
  const std::size_t j8 = 0;
#endif
  for (std::size_t i = 0; i < n16; i += 16) {
#if defined(__SSE2__)
    for (std::size_t j = 0; j < j8; j += 8) Transpose16x8(in, element_size, i, j, n, out);
#endif
    for (std::size_t j = j8; j < element_size; ++j) {
      for (std::size_t e = i; e < i + 16; ++e) out[j * n + e] = in[e * element_size + j];
    }
  }
  for (std::size_t e = n16; e < n; ++e) {
    for (std::size_t j = 0; j < element_size; ++j) out[j * n + e] = in[e * element_size + j];
  }
  const std::size_t tail = bytes - n * element_size;  // left as is by HDF5
  if (tail) std::memcpy(out + n * element_size, in + n * element_size, tail);
}

void UnshuffleBytes(const std::uint8_t* in, std::size_t bytes, std::size_t element_size,
                    std::uint8_t* out) {
  const std::size_t n = element_size ? bytes / element_size : 0;
  if (element_size <= 1 || n <= 1) {
    if (bytes) std::memcpy(out, in, bytes);
    return;
  }
  // Whole groups of 16 elements x 8 planes by SSE2; the last
  // element_size % 8 planes and the last n % 16 elements byte by byte.
  const std::size_t n16 = n / 16 * 16;
#if defined(__SSE2__)
  const std::size_t j8 = element_size / 8 * 8;
#else
  const std::size_t j8 = 0;
#endif
  for (std::size_t i = 0; i < n16; i += 16) {
#if defined(__SSE2__)
    for (std::size_t j = 0; j < j8; j += 8) Untranspose8x16(in, i, j, n, element_size, j, out);
#endif
    for (std::size_t j = j8; j < element_size; ++j) {
      for (std::size_t e = i; e < i + 16; ++e) out[e * element_size + j] = in[j * n + e];
    }
  }
  for (std::size_t e = n16; e < n; ++e) {
    for (std::size_t j = 0; j < element_size; ++j) out[e * element_size + j] = in[j * n + e];
  }
  const std::size_t tail = bytes - n * element_size;
  if (tail) std::memcpy(out + n * element_size, in + n * element_size, tail);
}

void UnshuffleRuns(const std::uint8_t* in, std::size_t n, const ByteRun* runs, std::size_t num_runs,
                   std::size_t out_stride, std::uint8_t* out) {
  UnshuffleRunsPart(in, n, n, runs, num_runs, out_stride, out);
}

void UnshuffleRunsPart(const std::uint8_t* in, std::size_t plane_bytes, std::size_t count,
                       const ByteRun* runs, std::size_t num_runs, std::size_t out_stride,
                       std::uint8_t* out) {
  const std::size_t n = plane_bytes;
  const std::size_t n16 = count / 16 * 16;
  for (std::size_t r = 0; r < num_runs; ++r) {
    const ByteRun& run = runs[r];
    std::size_t j = run.src;
    const std::size_t end = run.src + run.bytes;
#if defined(__SSE2__)
    for (; j + 8 <= end; j += 8) {  // eight planes at a time, sixteen elements
      const std::size_t at = run.dst + (j - run.src);
      for (std::size_t i = 0; i < n16; i += 16) Untranspose8x16(in, i, j, n, out_stride, at, out);
      for (std::size_t e = n16; e < count; ++e) {
        for (std::size_t b = 0; b < 8; ++b) out[e * out_stride + at + b] = in[(j + b) * n + e];
      }
    }
#endif
    for (; j < end; ++j) {
      const std::size_t at = run.dst + (j - run.src);
      const std::uint8_t* plane = in + j * n;
      for (std::size_t e = 0; e < count; ++e) out[e * out_stride + at] = plane[e];
    }
  }
}

Result<ChunkDeflater::Output> ChunkDeflater::ShuffleDeflate(const void* data, std::size_t bytes,
                                                            std::size_t element_size, int level,
                                                            std::size_t period) {
  if (shuffled_.size() < bytes) shuffled_.resize(bytes);
  ShuffleBytes(static_cast<const std::uint8_t*>(data), bytes, element_size, shuffled_.data());
  // A shuffled plane holds one byte per element: `period` elements apart
  // are `period` bytes apart.
  return Deflate(shuffled_.data(), bytes, level, period,
                 element_size > 1 ? bytes / element_size : 0);
}

std::uint8_t* ChunkDeflater::InputBuffer(std::size_t bytes) {
  if (input_.size() < bytes) input_.resize(bytes);
  return input_.data();
}

Result<ChunkDeflater::Output> ChunkDeflater::Deflate(const void* shuffled, std::size_t bytes,
                                                     int level, std::size_t period,
                                                     std::size_t plane_bytes) {
  if (level < 1 || level > 9) {
    return Status::InvalidArgument("deflate level " + std::to_string(level) + " is not 1..9");
  }
  if (level == 1) {
    const std::size_t bound = RunLengthDeflater::Bound(bytes);
    if (out_.size() < bound) out_.resize(bound);
    const auto* in = static_cast<const std::uint8_t*>(shuffled);
    return Output{out_.data(), run_length_.Compress(in, bytes, out_.data(), period, plane_bytes)};
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
