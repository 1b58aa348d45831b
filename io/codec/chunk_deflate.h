// ChunkDeflater: applies HDF5's shuffle and deflate filters to one chunk in
// our own code, so the writer can hand finished chunks to H5Dwrite_chunk
// (table_chunk_writer.h) instead of running zlib through HDF5's pipeline.
//
// The output is exactly what HDF5's filter pipeline decodes: the shuffle
// filter's byte transposition (H5Zshuffle.c: byte j of element i goes to
// j * n + i, a tail of bytes % element_size bytes stays in place; no change
// for 1-byte elements or a single element), then a zlib stream (RFC 1950,
// Adler-32 trailer) as the deflate filter inflates. The compressed bytes
// differ from zlib's own at the same level (libdeflate's matcher at levels
// 2-9, run_length_deflate.h at level 1), the decoded bytes do not. One
// deflater per writer thread: it keeps its compressors and buffers across
// calls. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/codec/run_length_deflate.h"
#include "tstat/status.h"

struct libdeflate_compressor;

namespace tstat::io {

class ChunkDeflater {
 public:
  ChunkDeflater() = default;
  ~ChunkDeflater();
  ChunkDeflater(const ChunkDeflater&) = delete;
  ChunkDeflater& operator=(const ChunkDeflater&) = delete;

  // Shuffles `bytes` bytes of `element_size`-byte elements, then compresses
  // them as a zlib stream at `level` (1..9, as H5Pset_deflate): level 1 by
  // the run-length encoder (run_length_deflate.h), which also matches each
  // element's bytes against those `period` elements before (e.g. the rows
  // of one step; 0: none), 2..9 by libdeflate. The result points into this
  // object and stays valid until the next call.
  struct Output {
    const std::uint8_t* data = nullptr;
    std::size_t size = 0;
  };
  Result<Output> ShuffleDeflate(const void* data, std::size_t bytes, std::size_t element_size,
                                int level, std::size_t period = 0);
  // Compresses `bytes` bytes that are already shuffled (`period` in bytes of
  // a shuffled plane, and `plane_bytes`, a plane's length: level 1 only).
  Result<Output> Deflate(const void* shuffled, std::size_t bytes, int level, std::size_t period = 0,
                         std::size_t plane_bytes = 0);
  // A buffer of at least `bytes` bytes for the caller to assemble a chunk in
  // (e.g. packed rows) before ShuffleDeflate; kept across calls, so chunks
  // do not page-fault fresh memory in.
  std::uint8_t* InputBuffer(std::size_t bytes);

 private:
  RunLengthDeflater run_length_;
  libdeflate_compressor* compressor_ = nullptr;
  int level_ = -1;
  std::vector<std::uint8_t> input_;
  std::vector<std::uint8_t> shuffled_;
  std::vector<std::uint8_t> out_;
};

// HDF5's shuffle filter (forward direction) from `in` to `out` (`bytes` each).
void ShuffleBytes(const std::uint8_t* in, std::size_t bytes, std::size_t element_size,
                  std::uint8_t* out);
// Its inverse: byte j * n + i of `in` becomes byte j of element i of `out`
// (n = bytes / element_size; the tail of bytes % element_size stays put).
void UnshuffleBytes(const std::uint8_t* in, std::size_t bytes, std::size_t element_size,
                    std::uint8_t* out);

// Bytes [src, src + bytes) of an element go to [dst, dst + bytes) of a row.
struct ByteRun {
  std::size_t src = 0, dst = 0, bytes = 0;
};
// The inverse shuffle of `n` elements (the planes at `in`, n bytes each)
// straight into rows of another layout: byte src + k of element i goes to
// out[i * out_stride + dst + k] for each run; bytes no run covers are not
// written. Unshuffling then copying members into padded structs, in one
// pass.
void UnshuffleRuns(const std::uint8_t* in, std::size_t n, const ByteRun* runs, std::size_t num_runs,
                   std::size_t out_stride, std::uint8_t* out);
// The same for `count` consecutive elements of planes `plane_bytes` long,
// the first at `in` (in plane 0; plane j at in + j * plane_bytes): a part
// of a chunk's elements, to rows `out_stride` bytes apart.
void UnshuffleRunsPart(const std::uint8_t* in, std::size_t plane_bytes, std::size_t count,
                       const ByteRun* runs, std::size_t num_runs, std::size_t out_stride,
                       std::uint8_t* out);

}  // namespace tstat::io
