// Checked wrappers of the HDF5 file module (H5F) and groups (H5G, H5L).
//
// Files are read with the sec2 (POSIX) driver. Segments are written through
// tstat's own driver (segment_driver.h), which keeps metadata in memory.
// Every file uses the "strong" close degree (closing a file closes anything
// still open in it). Functions return a Status naming the file; callers hold
// the HDF5 lock (h5_lock.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

// Opens an existing file read-only. kCorruption when HDF5 cannot parse it.
Result<H5File> OpenH5FileReadOnly(const std::string& path);
// Closes and flushes `file`; kIoError (kResourceExhausted when the disk is
// full) if the flush fails. `file` is released either way.
Status CloseH5File(H5File* file, const std::string& path);

// HDF5 identifiers of files and objects in them still open in this process
// (leak checks in tests). Takes the HDF5 lock.
std::int64_t OpenH5ObjectCount();

Result<H5Group> CreateH5Group(hid_t loc, const char* name, const std::string& path);
// Whether the link `name` exists directly under `loc`.
Result<bool> H5LinkExists(hid_t loc, const char* name, const std::string& path);

}  // namespace tstat::io
