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

// The memory of an in-memory HDF5 file, owned here instead of by HDF5: the
// core driver allocates and grows it through file-image callbacks, and when
// the file is closed it is left here, holding the complete file, so a
// segment is sealed and written to disk from where HDF5 built it (no copy of
// the image). Must outlive the file; not movable (HDF5 holds its address).
class CoreFileMemory {
 public:
  CoreFileMemory() = default;
  ~CoreFileMemory();
  CoreFileMemory(const CoreFileMemory&) = delete;
  CoreFileMemory& operator=(const CoreFileMemory&) = delete;
  // After the file is closed: its bytes. size() is the memory's size, which
  // the core driver rounds up to its allocation step: the file is the first
  // FlushedH5FileSize() bytes.
  std::uint8_t* data() const { return static_cast<std::uint8_t*>(bytes_); }
  std::size_t size() const { return size_; }
  bool closed() const { return closed_; }

 private:
  friend struct CoreFileMemoryCallbacks;
  void Release();
  void* bytes_ = nullptr;  // an anonymous mapping of mapped_ bytes
  std::size_t mapped_ = 0;
  std::size_t size_ = 0;
  bool closed_ = false;
};

// Creates an HDF5 file in memory (`name` identifies it in messages). Nothing
// is written to disk. The file has a user block of `user_block` bytes (0 or
// a power of two >= 512) that HDF5 never writes: zero bytes at first.
Result<H5File> CreateInMemoryH5File(const std::string& name, std::size_t user_block,
                                    CoreFileMemory* memory);
// Flushes the open file (created with a user block of `user_block` bytes)
// and returns the size of the whole file, user block included: the end of
// the space HDF5 allocated, which closing does not change (a flush releases
// the free-space aggregators as a close does).
Result<std::size_t> FlushedH5FileSize(hid_t file, std::size_t user_block,
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
