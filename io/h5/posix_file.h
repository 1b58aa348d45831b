// The POSIX file operations the run storage needs, as Status-returning calls:
// directories, listing, fsync, atomic rename, small whole-file reads/writes.
//
// Errors name the path, the operation and strerror(errno); ENOSPC/EDQUOT
// become kResourceExhausted, ENOENT kNotFound, everything else kIoError.
// Thread safety: plain system calls; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tstat/status.h"

namespace tstat::io {

// Owns a file descriptor: closes it on scope exit (where the close result
// matters, release() it and close it yourself).
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// The Status for a failed `op` on `path` with error number `err`.
Status ErrnoStatus(const std::string& path, const char* op, int err);

// mkdir -p; fsyncs each directory whose entry list it changed.
Status MakeDirs(const std::string& path);
// Names of the entries of `dir` (no "." or ".."), unsorted.
Result<std::vector<std::string>> ListDir(const std::string& dir);
bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);
Result<std::uint64_t> FileSize(const std::string& path);

Status FsyncPath(const std::string& path);  // a file or a directory

// Asks for transparent huge pages on the 2 MiB-aligned interior of
// [data, data + bytes), before its first touch: one page fault and clear per
// 2 MiB instead of per 4 KiB (THP's "madvise" mode, Debian's default, needs the
// hint). Best effort: a refusal changes nothing.
void AdviseHugePages(void* data, std::size_t bytes);

Status RenameFile(const std::string& from, const std::string& to);
// Removes a file; a missing file is not an error.
Status RemoveFile(const std::string& path);

// Creates (truncates) `path`, writes `size` bytes and fsyncs it. On failure
// the partial file is removed.
Status WriteNewFileDurably(const std::string& path, const void* data, std::size_t size);

// Writes `contents` to `path` atomically: path.tmp, fsync, rename, fsync dir.
Status WriteFileAtomically(const std::string& path, const std::string& contents);
Result<std::string> ReadWholeFile(const std::string& path);
// Reads a file of a run directory that anyone may have put there: a regular
// file of at most `max_bytes`, else an error naming the cause (a FIFO or a
// device is refused without blocking on it, a larger file is not read).
Result<std::string> ReadRegularFile(const std::string& path, std::uint64_t max_bytes);

// Opens for reading a file of a run directory that anyone may have put
// there: a regular file only (a FIFO, device or directory is refused without
// blocking on it: kInvalidArgument naming it); its size into *size.
Result<UniqueFd> OpenRegularFile(const std::string& path, std::uint64_t* size);

// Reads `bytes` bytes of `fd` at `offset` into `out` (EINTR retried, short
// reads continued): the bytes read, fewer only where the file ends.
Result<std::size_t> PreadUpTo(int fd, void* out, std::size_t bytes, std::uint64_t offset,
                              const std::string& path);

// Reads bytes [offset, offset + max_bytes) at most of a regular file that
// anyone may have put in a run directory (FIFOs and devices refused without
// blocking; a symlink is followed as open(2) does, a loop is an error):
// fewer when the file ends first.
Result<std::string> ReadRegularFileRange(const std::string& path, std::uint64_t offset,
                                         std::uint64_t max_bytes);

// Appends `size` bytes to `path`, whose length must be `expected_size`
// (create_new: creates it, refusing one that exists, and a symlink). On a
// failed or short write the file is cut back to `expected_size`; *cut_back
// tells whether that worked (false: the file may end in a partial append).
Status AppendToFile(const std::string& path, bool create_new, std::uint64_t expected_size,
                    const void* data, std::size_t size, bool* cut_back);

// The directory part of `path` ("." when there is none).
std::string DirName(const std::string& path);
std::string JoinPath(const std::string& a, const std::string& b);

}  // namespace tstat::io
