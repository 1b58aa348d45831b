// See segment_store.h.
#include "io/h5/segment_store.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <vector>

#include "io/h5/posix_file.h"
#include "io/h5/segment_seal.h"

namespace tstat::io {
namespace {

constexpr std::size_t kMemoryStep = 2u << 20;

// Writes all `size` bytes at `offset`; 0, or the errno of the failure.
int PwriteAll(int fd, const void* data, std::size_t size, std::uint64_t offset) {
  const auto* p = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, p + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

SegmentStore::~SegmentStore() {
  if (memory_ != nullptr) ::munmap(memory_, mapped_);
  if (fd_ >= 0) ::close(fd_);
}

Status SegmentStore::Create(const std::string& path) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return ErrnoStatus(path, "create", errno);
  return Status::OK();
}

bool SegmentStore::Fail(const char* what, int err) {
  if (error_.ok()) error_ = ErrnoStatus(path_, what, err);
  return false;
}

bool SegmentStore::GrowMemory(std::size_t size) {
  if (size <= mapped_) return true;
  // Grow by half again at least: few remaps for a file built from many writes.
  std::size_t want = std::max(size, mapped_ + mapped_ / 2);
  want = (want + kMemoryStep - 1) / kMemoryStep * kMemoryStep;
  void* p = memory_ == nullptr
                ? ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                : ::mremap(memory_, mapped_, want, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) return Fail("grow the in-memory metadata", errno);
  // No huge pages, even where THP is "always": the image is sparse where raw
  // data went to disk (object headers sit between snapshots), and a 2 MiB
  // page would be zeroed for each of them. Best effort.
  ::madvise(p, want, MADV_NOHUGEPAGE);
  memory_ = p;
  mapped_ = want;
  return true;
}

void SegmentStore::ForgetWriteCrcs(std::uint64_t begin, std::uint64_t end) {
  auto it = write_crcs_.upper_bound(begin);
  if (it != write_crcs_.begin() && std::prev(it)->second.end > begin) --it;
  while (it != write_crcs_.end() && it->first < end) it = write_crcs_.erase(it);
}

void SegmentStore::ForgetDisk(std::uint64_t begin, std::uint64_t end) {
  auto it = on_disk_.upper_bound(begin);
  if (it != on_disk_.begin() && std::prev(it)->second > begin) --it;
  while (it != on_disk_.end() && it->first < end) {
    const std::uint64_t range_begin = it->first, range_end = it->second;
    it = on_disk_.erase(it);
    if (range_begin < begin) on_disk_[range_begin] = begin;
    if (range_end > end) {
      on_disk_[end] = range_end;
      break;
    }
  }
}

bool SegmentStore::Write(bool raw_data, std::uint64_t offset, std::size_t size, const void* data) {
  if (size == 0) return true;
  const std::uint64_t end = offset + size;
  eof_ = std::max(eof_, end);
  // After a failure everything goes to memory: the segment is lost, and its
  // file must still close cleanly (Finish reports the failure).
  if (raw_data && size >= kDirectWriteBytes && error_.ok()) {
    if (const int err = PwriteAll(fd_, data, size, offset)) return Fail("write", err);
#if defined(SYNC_FILE_RANGE_WRITE)
    // Starts writeback without waiting for it; a refusal only means Finish's
    // fsync does all of it.
    (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(size),
                            SYNC_FILE_RANGE_WRITE);
#endif
    ForgetWriteCrcs(offset, end);
    write_crcs_[offset] = WriteCrc{end, libdeflate_crc32(0, data, size)};
    direct_bytes_ += size;
    // Record [offset, end) as held on disk, merged with touching ranges.
    std::uint64_t begin = offset, stop = end;
    auto it = on_disk_.upper_bound(begin);
    if (it != on_disk_.begin() && std::prev(it)->second >= begin) --it;
    while (it != on_disk_.end() && it->first <= stop) {
      begin = std::min(begin, it->first);
      stop = std::max(stop, it->second);
      it = on_disk_.erase(it);
    }
    on_disk_[begin] = stop;
    return true;
  }
  if (!GrowMemory(static_cast<std::size_t>(end))) return false;
  std::memcpy(static_cast<char*>(memory_) + offset, data, size);
  ForgetDisk(offset, end);
  ForgetWriteCrcs(offset, end);
  return true;
}

bool SegmentStore::Read(std::uint64_t offset, std::size_t size, void* data) {
  auto* out = static_cast<char*>(data);
  const std::uint64_t end = offset + size;
  std::uint64_t pos = offset;
  while (pos < end) {
    auto it = on_disk_.upper_bound(pos);
    const std::uint64_t next_disk = it == on_disk_.end() ? end : std::min(end, it->first);
    if (it != on_disk_.begin() && std::prev(it)->second > pos) {
      const std::uint64_t stop = std::min(end, std::prev(it)->second);
      while (pos < stop) {
        const ssize_t n = ::pread(fd_, out + (pos - offset), stop - pos, static_cast<off_t>(pos));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Fail("read back", n < 0 ? errno : EIO);
        pos += static_cast<std::uint64_t>(n);
      }
      continue;
    }
    // In memory; never-written bytes (past the mapping too) are zero.
    const std::uint64_t in_memory =
        std::min<std::uint64_t>(next_disk, std::max<std::uint64_t>(pos, mapped_));
    if (in_memory > pos)
      std::memcpy(out + (pos - offset), static_cast<char*>(memory_) + pos, in_memory - pos);
    if (next_disk > in_memory) std::memset(out + (in_memory - offset), 0, next_disk - in_memory);
    pos = next_disk;
  }
  return true;
}

Status SegmentStore::WriteMemoryRange(std::uint64_t begin, std::uint64_t end) {
  end = std::min<std::uint64_t>(end, mapped_);  // beyond: zeros, from the final ftruncate
  if (begin >= end) return Status::OK();
  const int err = PwriteAll(fd_, static_cast<const char*>(memory_) + begin, end - begin, begin);
  return err ? ErrnoStatus(path_, "write", err) : Status::OK();
}

Status SegmentStore::CrcOfRange(std::uint64_t begin, std::uint64_t end, bool on_disk,
                                std::uint32_t* crc) {
  static const std::vector<unsigned char> kZeros(1 << 16);
  if (!on_disk) {
    const std::uint64_t in_memory =
        std::min<std::uint64_t>(end, std::max<std::uint64_t>(begin, mapped_));
    if (in_memory > begin) {
      *crc = libdeflate_crc32(*crc, static_cast<const char*>(memory_) + begin, in_memory - begin);
    }
    for (std::uint64_t pos = in_memory; pos < end;) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(kZeros.size(), end - pos));
      *crc = libdeflate_crc32(*crc, kZeros.data(), n);
      pos += n;
    }
    return Status::OK();
  }
  return CrcOfDiskRange(begin, end, crc);
}

Status SegmentStore::CrcOfDiskRange(std::uint64_t begin, std::uint64_t end, std::uint32_t* crc) {
  std::uint64_t pos = begin;
  auto it = write_crcs_.lower_bound(begin);
  while (pos < end) {
    if (it != write_crcs_.end() && it->first == pos && it->second.end <= end) {
      *crc = static_cast<std::uint32_t>(
          crc32_combine(*crc, it->second.crc, static_cast<z_off_t>(it->second.end - pos)));
      pos = it->second.end;
      ++it;
      continue;
    }
    // Not a recorded write (a clipped edge, or bytes overwritten since).
    while (it != write_crcs_.end() && it->first <= pos) ++it;
    const std::uint64_t stop = it == write_crcs_.end() ? end : std::min(end, it->first);
    TSTAT_RETURN_IF_ERROR(Crc32OfFileRange(fd_, pos, stop, path_, crc));
    pos = stop;
  }
  return Status::OK();
}

Status SegmentStore::Finish(std::uint64_t size, std::size_t user_block) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return Status::FailedPrecondition(path_ + ": segment store is not open");
  std::uint32_t crc = 0;
  std::uint64_t pos = user_block;
  for (const auto& [range_begin, range_end] : on_disk_) {
    const std::uint64_t begin = std::max<std::uint64_t>(range_begin, user_block);
    const std::uint64_t end = std::min(range_end, size);
    if (begin >= end) continue;
    if (pos < begin) {
      TSTAT_RETURN_IF_ERROR(WriteMemoryRange(pos, begin));
      TSTAT_RETURN_IF_ERROR(CrcOfRange(pos, begin, false, &crc));
    }
    TSTAT_RETURN_IF_ERROR(CrcOfRange(begin, end, true, &crc));
    pos = end;
  }
  if (pos < size) {
    TSTAT_RETURN_IF_ERROR(WriteMemoryRange(pos, size));
    TSTAT_RETURN_IF_ERROR(CrcOfRange(pos, size, false, &crc));
  }
  const std::string seal = SegmentSealHeader(size, crc);
  if (const int err = PwriteAll(fd_, seal.data(), seal.size(), 0)) {
    return ErrnoStatus(path_, "write the seal", err);
  }
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return ErrnoStatus(path_, "truncate", errno);
  if (::fsync(fd_) != 0) return ErrnoStatus(path_, "fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return ErrnoStatus(path_, "close", errno);
  return Status::OK();
}

}  // namespace tstat::io
