// Checked wrappers of the HDF5 file module (H5F) and groups (H5G, H5L).
//
// Files are read with the sec2 (POSIX) driver. Segments are WRITTEN in memory
// (the core driver, no backing store) and their image is written to disk by
// the caller with plain POSIX calls: HDF5 never sees a disk error, so a full
// or read-only disk can never leave a half-closed file inside the library.
// Every file uses the "strong" close degree (closing a file closes anything
// still open in it). Functions return a Status naming the file; callers hold
// the HDF5 lock (h5_lock.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

// Creates an HDF5 file in memory (`name` identifies it in messages). Nothing
// is written to disk.
Result<H5File> CreateInMemoryH5File(const std::string& name);
// Bytes of a file image, not zero-filled when allocated (a segment image is
// hundreds of MiB of raw snapshots that are copied in at once).
struct H5FileImage {
  std::unique_ptr<std::uint8_t[]> bytes;
  std::size_t size = 0;
};
// Sets `image` to `prefix_bytes` zero bytes followed by the bytes of the open
// file. (HDF5 finds a superblock at offset 0, 512, 1024, ... and treats the
// bytes before it as the user block, so a 512-byte prefix is a user block.)
Status GetH5FileImage(hid_t file, std::size_t prefix_bytes, H5FileImage* image,
                      const std::string& name);
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
