// Writes a 1-D table whose creation list declares shuffle + deflate as
// finished chunks (H5Dwrite_chunk): rows are packed to the file type, then
// shuffled and compressed by a ChunkDeflater (chunk_deflate.h). HDF5's own
// filter pipeline and type conversion are skipped on write; readers (HDF5,
// h5py, h5dump) decode the chunks through the declared filters as usual.
//
// Only fixed-size rows whose members have the same type in memory and file
// (the packed copy of a row struct, or a plain number type) qualify: anything
// else (variable-length strings or sequences) makes RowPacker::Make return
// nullopt and the caller writes with H5Dwrite. Callers hold the HDF5 lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

// Copies rows from the memory layout (padded struct) to the file layout
// (packed) by a few memcpy runs per row.
class RowPacker {
 public:
  static std::optional<RowPacker> Make(hid_t mem_type, hid_t file_type);
  std::size_t mem_size() const { return mem_size_; }
  std::size_t file_size() const { return file_size_; }
  void Pack(const std::uint8_t* rows, std::size_t n, std::uint8_t* out) const;

  struct Run {
    std::size_t mem_offset, file_offset, size;
  };

 private:
  std::vector<Run> runs_;
  std::size_t mem_size_ = 0, file_size_ = 0;
  bool identity_ = false;  // memory and file rows are the same bytes
};

// Writes `rows` rows at `data` (memory layout of `packer`) to the chunked
// 1-D `dataset` of `chunk_rows` rows per chunk, each chunk shuffled and
// deflated at `level`. The last chunk is padded with zero rows to a whole
// chunk, as HDF5 stores edge chunks.
Status WriteDeflatedChunks(hid_t dataset, const RowPacker& packer, const void* data,
                           std::uint64_t rows, std::uint64_t chunk_rows, int level,
                           ChunkDeflater* deflater, const std::string& what);

}  // namespace tstat::io
