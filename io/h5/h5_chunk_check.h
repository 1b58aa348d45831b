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

#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

// OK for compact and contiguous datasets (see CheckStorageHoldsElements);
// kCorruption naming `what` and the chunk otherwise. With `count` > 0 (a
// 1-D dataset), only the chunks holding elements [first, first + count).
Status CheckChunksDecodeToFullSize(hid_t dataset, const std::string& what, std::uint64_t first = 0,
                                   std::uint64_t count = 0);

}  // namespace tstat::io
