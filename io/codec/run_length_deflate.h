// RunLengthDeflater: tstat's own deflate encoder for compression level 1.
//
// Shuffled table chunks are mostly long runs of one byte (the zero high
// bytes of counts, the constant bytes of step keys and exponents), and
// libdeflate's hash-chain matcher still visits every byte of a run:
// ~350-550 MB/s on such chunks, two thirds of the writer's CPU with 1,000
// tensors per step. This encoder finds runs eight bytes at a time and emits
// them as distance-1 matches; other bytes are literals. Each block of up to
// kBlockBytes input bytes gets its own Huffman codes, or is stored as is
// when that is smaller (random mantissa bytes), so the output never exceeds
// the input by more than a few bytes per block.
//
// The output is an ordinary zlib stream (RFC 1950 around RFC 1951 blocks):
// HDF5's deflate filter, zlib, h5py and h5dump decode it. Given the rows
// per step (`period`), it also matches each byte against the same byte of
// the previous step's row, which is where a table's repetition is; without
// it the output is larger than libdeflate's at level 2+ (no matches at other
// distances). Not thread-safe; keeps its buffers across calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tstat::io {

class RunLengthDeflater {
 public:
  static constexpr std::size_t kBlockBytes = 32768;

  // Writes the zlib stream of `data[0, size)` to `out`, which has room for
  // Bound(size) bytes; returns its size. With a `period` in [2, 32768],
  // bytes that repeat those `period` bytes before them are matches too:
  // in a shuffled table chunk of R rows per step, period R finds each byte
  // of a row in the same row of the previous step. Other periods are
  // ignored (runs only).
  std::size_t Compress(const std::uint8_t* data, std::size_t size, std::uint8_t* out,
                       std::size_t period = 0);

  // The most bytes Compress can produce for `size` input bytes.
  static std::size_t Bound(std::size_t size);

 private:
  // Literals (0..255) and match lengths (256 + 3..258; | 0x800 at the
  // period distance) of the current block.
  std::vector<std::uint16_t> tokens_;
};

}  // namespace tstat::io
