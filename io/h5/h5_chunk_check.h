// CheckChunksDecodeToFullSize: before HDF5 reads a chunked dataset, every
// chunk is checked to decode to exactly a chunk's bytes. libhdf5 1.10.8
// trusts the chunk: a crafted deflate stream that inflates to fewer bytes
// (or an unfiltered chunk stored shorter than a chunk) makes it copy past
// the end of its buffer. Only the filters tstat writes are accepted
// (shuffle, deflate); each chunk's raw bytes are inflated once more here,
// with libdeflate, into a scratch buffer that is then dropped.
// Callers hold the HDF5 lock (h5_lock.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/h5/h5_handle.h"
#include "tstat/status.h"

struct libdeflate_decompressor;

namespace tstat::io {

// A chunked dataset's geometry and filters (`chunk` empty: not chunked).
struct ChunkFilters {
  std::vector<hsize_t> chunk;     // elements per chunk, per dimension
  std::uint64_t chunk_bytes = 0;  // a whole chunk, decoded
  std::size_t element_bytes = 0;  // of the stored type
  bool shuffle = false, deflate = false;
  unsigned shuffle_bit = 0, deflate_bit = 0;  // in a chunk's filter mask: skipped
};
// kCorruption for chunks over 64 MiB or filters other than [shuffle] [deflate].
Result<ChunkFilters> InspectChunks(hid_t dataset, const std::string& what);

// The chunk at element `offset` (its stored bytes read into `raw`) decoded
// into `decoded`: exactly chunk_bytes, still shuffled when *shuffled. False
// when the chunk was never written. kCorruption naming `which` for a stored
// size or deflate stream that does not give a whole chunk.
Result<bool> DecodeChunk(hid_t dataset, const ChunkFilters& f, const hsize_t* offset,
                         libdeflate_decompressor* inflater, std::vector<unsigned char>* raw,
                         std::vector<unsigned char>* decoded, bool* shuffled,
                         const std::string& which);

// OK for compact and contiguous datasets (see CheckStorageHoldsElements);
// kCorruption naming `what` and the chunk otherwise. With `count` > 0 (a
// 1-D dataset), only the chunks holding elements [first, first + count).
Status CheckChunksDecodeToFullSize(hid_t dataset, const std::string& what, std::uint64_t first = 0,
                                   std::uint64_t count = 0);

// Looks up every chunk of a chunked dataset in its chunk index (the B-tree
// libhdf5 walks to read it) without reading one: OK for datasets that are
// not chunked.
Status WalkChunkIndex(hid_t dataset, const std::string& what);

}  // namespace tstat::io
