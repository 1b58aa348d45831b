// SegmentStore: where the bytes of a segment file being written live, behind
// tstat's HDF5 file driver (segment_driver.h).
//
// HDF5 metadata and small writes are kept in memory, as the core driver would
// keep the whole file. Raw-data writes of at least kDirectWriteBytes (the raw
// snapshots, large table chunks) go straight from the caller's buffer to the
// segment's `.tmp` file with pwrite: no copy through an in-memory image, and
// the page cache starts writing them back while the segment is still open.
// Finish() then writes the in-memory parts around them, the seal (its CRC is
// computed over the file's bytes in order) and fsyncs.
//
// Two things keep Finish short for a segment of large snapshots: each direct
// write's CRC is taken from the caller's buffer at write time (Finish combines
// them, and reads back only ranges later overwritten), and its writeback is
// started at once (sync_file_range), so the final fsync finds most of the
// bytes already on their way to the disk.
//
// Failure model (why HDF5 still cannot end up half-closed by a full disk): only
// raw-data writes touch the disk while HDF5 holds the file. A failed one fails
// that H5Dwrite; metadata stays in memory, so the caller closes the file
// normally and discards the segment. The first error (with errno) is kept and
// reported by error().
//
// Thread safety: none; one writer thread owns the store and its HDF5 file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "tstat/status.h"

namespace tstat::io {

class SegmentStore {
 public:
  // Raw-data writes this large or larger go to disk directly.
  static constexpr std::size_t kDirectWriteBytes = 64 << 10;

  SegmentStore() = default;
  ~SegmentStore();
  SegmentStore(const SegmentStore&) = delete;
  SegmentStore& operator=(const SegmentStore&) = delete;

  // Creates (truncates) `path`, opened for reading and writing.
  Status Create(const std::string& path);

  // The driver's view: absolute file offsets (the user block included).
  // Return false on failure; error() says why.
  bool Write(bool raw_data, std::uint64_t offset, std::size_t size, const void* data);
  bool Read(std::uint64_t offset, std::size_t size, void* data);
  void set_end_of_allocation(std::uint64_t eoa) { eoa_ = eoa; }
  std::uint64_t end_of_allocation() const { return eoa_; }
  // Bytes of the file written so far (the furthest end of any write).
  std::uint64_t end_of_file() const { return eof_; }

  // After HDF5 closed the file: writes the bytes kept in memory, the seal of
  // bytes [user_block, size) into [0, user_block) (segment_seal.h), sets the
  // length to `size`, fsyncs and closes. On failure the caller removes the
  // file.
  Status Finish(std::uint64_t size, std::size_t user_block);

  const Status& error() const { return error_; }
  std::uint64_t direct_bytes() const { return direct_bytes_; }
  const std::string& path() const { return path_; }

 private:
  bool Fail(const char* what, int err);
  bool GrowMemory(std::size_t size);
  // Removes [begin, end) from the ranges held on disk.
  void ForgetDisk(std::uint64_t begin, std::uint64_t end);
  Status WriteMemoryRange(std::uint64_t begin, std::uint64_t end);
  Status CrcOfRange(std::uint64_t begin, std::uint64_t end, bool on_disk, std::uint32_t* crc);
  // The CRC of on-disk bytes [begin, end): the recorded CRCs of direct writes
  // that tile it, file reads for the rest.
  Status CrcOfDiskRange(std::uint64_t begin, std::uint64_t end, std::uint32_t* crc);
  // Drops the recorded CRCs of direct writes overlapping [begin, end).
  void ForgetWriteCrcs(std::uint64_t begin, std::uint64_t end);

  std::string path_;
  int fd_ = -1;
  void* memory_ = nullptr;  // an anonymous mapping, zero where never written
  std::size_t mapped_ = 0;
  std::map<std::uint64_t, std::uint64_t> on_disk_;  // begin -> end: latest bytes are on disk
  struct WriteCrc {
    std::uint64_t end;
    std::uint32_t crc;  // of bytes [begin, end) as written, still unchanged
  };
  std::map<std::uint64_t, WriteCrc> write_crcs_;  // begin -> ...
  std::uint64_t eoa_ = 0, eof_ = 0;
  std::uint64_t direct_bytes_ = 0;
  Status error_;
};

}  // namespace tstat::io
