// tstat's HDF5 file driver for segments being written: an HDF5 virtual file
// driver whose bytes live in a SegmentStore (segment_store.h), so raw data
// goes from the caller's buffer to the segment's `.tmp` file and metadata
// stays in memory until the segment is sealed.
//
// Only the writer uses it; readers open finished segments with the sec2
// driver. Callers hold the HDF5 lock (h5_lock.h).
#pragma once

#include <cstddef>

#include "io/h5/h5_handle.h"
#include "io/h5/segment_store.h"
#include "tstat/status.h"

namespace tstat::io {

// Creates an HDF5 file with a user block of `user_block` bytes (0 or a power
// of two >= 512, never written by HDF5) on `store`, which must be created and
// must outlive the file. After the file is closed, store->end_of_allocation()
// is the file's length.
Result<H5File> CreateSegmentH5File(SegmentStore* store, std::size_t user_block);

}  // namespace tstat::io
