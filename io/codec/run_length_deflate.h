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
  static constexpr std::size_t kMinPlaneBytes = 64;
  // The shortest run of noise stored in a block of its own.
  static constexpr std::size_t kMinStoredRun = 1024;

  // Writes the zlib stream of `data[0, size)` to `out`, which has room for
  // Bound(size) bytes; returns its size. With a `period` in [2, 32768],
  // bytes that repeat those `period` bytes before them are matches too:
  // in a shuffled table chunk of R rows per step, period R finds each byte
  // of a row in the same row of the previous step. Other periods are
  // ignored (runs only).
  //
  // With `plane_bytes` (>= kMinPlaneBytes; a shuffled chunk's plane: its
  // number of elements), blocks end at plane boundaries where the planes
  // change between noise (nearly all literals) and the rest, and noise is
  // stored unless coding it saves more than 1/32: inflating copies those
  // bytes instead of decoding them one Huffman code at a time.
  std::size_t Compress(const std::uint8_t* data, std::size_t size, std::uint8_t* out,
                       std::size_t period = 0, std::size_t plane_bytes = 0);

  // The most bytes Compress can produce for `size` input bytes.
  static std::size_t Bound(std::size_t size);

 private:
  // The tokens of data[begin, end) into `tokens` (at most one per byte);
  // their number, and how many are literals into *literals.
  static std::size_t Tokenize(const std::uint8_t* data, std::size_t begin, std::size_t end,
                              std::size_t period, std::uint16_t* tokens, std::size_t* literals);
  // A piece of the input (Compress): bytes [begin, end), its tokens
  // tokens_[token_begin, token_end), whether it is noise.
  struct Piece {
    std::size_t begin, end, token_begin, token_end;
    bool noise;
  };
  // Literals (0..255) and match lengths (256 + 3..258; | 0x800 at the
  // period distance) of the input.
  std::vector<std::uint16_t> tokens_;
  std::vector<Piece> pieces_;
};

}  // namespace tstat::io
