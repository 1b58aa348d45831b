// TensorBoard's event files are TFRecord files: a sequence of records, each
//   uint64 length, uint32 masked CRC-32C of those 8 bytes,
//   the data (a serialized Event), uint32 masked CRC-32C of the data,
// little-endian. The mask rotates the CRC right by 15 bits and adds
// 0xa282ead8 (a CRC over data that holds CRCs stays meaningful).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "io/h5/posix_file.h"
#include "tstat/status.h"

namespace tstat::io::tensorboard {

// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial and final
// value all ones), continuing `crc` (0 starts one).
std::uint32_t Crc32c(const void* data, std::size_t size, std::uint32_t crc = 0);
std::uint32_t MaskedCrc32c(const void* data, std::size_t size);

// Writes one new TFRecord file. Records are buffered; Close() writes what
// is buffered and syncs the file to disk. A write error (disk full) is
// returned by the call that met it and by every later one.
// Thread safety: one thread per writer.
class RecordWriter {
 public:
  // Creates `path` (kFailedPrecondition if it exists: a file is never
  // overwritten or followed through a link).
  static Result<std::unique_ptr<RecordWriter>> Create(const std::string& path);
  ~RecordWriter();  // Close(), its error lost: call Close() to see it
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  Status Write(std::string_view record);
  Status Close();
  std::uint64_t bytes_written() const { return written_ + buffer_.size(); }
  const std::string& path() const { return path_; }

 private:
  RecordWriter(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  Status Flush();

  std::string path_;
  UniqueFd fd_;
  std::string buffer_;
  std::uint64_t written_ = 0;
  Status status_;
  bool closed_ = false;
};

}  // namespace tstat::io::tensorboard
