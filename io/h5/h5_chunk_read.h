// ReadChunkedDataset: a 1-D chunked dataset read by tstat's own code rather
// than through libhdf5's filter pipeline. Each chunk's stored bytes
// (H5Dread_chunk) are inflated once with libdeflate into exactly a chunk's
// bytes (the check of h5_chunk_check.h, which this replaces for such reads),
// unshuffled, and converted from the stored row type to the memory type
// with H5Tconvert, a chunk at a time into the caller's buffer. libhdf5 then
// never inflates a chunk nor copies from one, and each chunk is inflated
// once instead of twice (check, then read).
// Only the filters tstat writes are accepted (shuffle, deflate); the stored
// type must pass CheckReadableAs against `mem_type` (the caller checks).
// Callers hold the HDF5 lock (h5_lock.h).
#pragma once

#include <cstdint>
#include <string>

#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

// Whether `dataset` is one ReadChunkedDataset reads: 1-D and chunked.
bool IsChunked1D(hid_t dataset);

// Reads all `count` elements (its extent) of the 1-D chunked `dataset` into
// `out`, laid out as `mem_type`. `out` holds count elements of mem_type and
// is zero-filled by the caller (members the file lacks read as zero; so do
// chunks never written). kCorruption naming `what` and the chunk for any
// chunk that is not a valid stream of exactly a chunk's bytes, or filters
// tstat does not write.
Status ReadChunkedDataset(hid_t dataset, hid_t mem_type, std::uint64_t count, void* out,
                          const std::string& what);
// Elements [begin, begin + count) alone (the caller checked they lie in its
// extent), decoding only the chunks that hold them; errors as above.
Status ReadChunkedDatasetRange(hid_t dataset, hid_t mem_type, std::uint64_t begin,
                               std::uint64_t count, void* out, const std::string& what);

}  // namespace tstat::io
