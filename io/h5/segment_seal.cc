// See segment_seal.h.
#include "io/h5/segment_seal.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "io/h5/posix_file.h"

namespace tstat::io {
namespace {

constexpr char kMagic[] = "TSTAT-SEGMENT 1\n";

}  // namespace

std::string SegmentSealHeader(std::uint64_t length, std::uint32_t crc) {
  char text[128];
  const int n = std::snprintf(text, sizeof(text), "%slength %" PRIu64 "\ncrc32 %08" PRIx32 "\n",
                              kMagic, length, crc);
  std::string header(text, static_cast<std::size_t>(n));
  header.resize(kSegmentUserBlock, '\0');
  return header;
}

Status Crc32OfFileRange(int fd, std::uint64_t begin, std::uint64_t end, const std::string& path,
                        std::uint32_t* crc) {
  // A piece at a time that stays in the L2 cache between the copy out of the
  // page cache and the checksum (not zeroed first: every byte used is read).
  const auto size =
      static_cast<std::size_t>(std::min<std::uint64_t>(256 << 10, end > begin ? end - begin : 0));
  std::unique_ptr<unsigned char[]> buffer(new unsigned char[size]);
  std::uint32_t value = *crc;
  std::uint64_t offset = begin;
  while (offset < end) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(size, end - offset));
    TSTAT_ASSIGN_OR_RETURN(std::size_t n, PreadUpTo(fd, buffer.get(), want, offset, path));
    if (n < want) return Status::Corruption(path + ": file shrank while being checksummed");
    value = libdeflate_crc32(value, buffer.get(), n);
    offset += n;
  }
  *crc = value;
  return Status::OK();
}

void SealSegmentImage(std::vector<std::uint8_t>* image) {
  // libdeflate's CRC-32 (carry-less multiply where the CPU has it) is the
  // same function as zlib's but ~10x faster; zlib's was as slow as the disk.
  const std::uint32_t crc =
      libdeflate_crc32(0, image->data() + kSegmentUserBlock, image->size() - kSegmentUserBlock);
  const std::string header = SegmentSealHeader(image->size(), crc);
  std::memcpy(image->data(), header.data(), kSegmentUserBlock);
}

Status VerifySegmentSeal(const std::string& path) {
  // O_NONBLOCK: a FIFO named like a segment must not block the reader. What
  // cannot be a segment (a FIFO, a device, a directory, a symlink loop) is
  // kCorruption, so the reader skips it and reads the rest of the run.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ELOOP) return Status::Corruption(path + ": a symlink loop, not a segment");
    return ErrnoStatus(path, "open", err);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(path, "fstat", errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::Corruption(path +
                              ": not a regular file (a FIFO, device or directory), "
                              "not a segment");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < kSegmentUserBlock) {
    return Status::Corruption(path + ": truncated segment (" + std::to_string(size) +
                              " bytes, smaller than its 512-byte seal)");
  }
  std::string header(kSegmentUserBlock, '\0');
  if (::pread(fd.get(), header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
    return ErrnoStatus(path, "read seal", errno ? errno : EIO);
  }
  std::uint64_t length = 0;
  std::uint32_t stored = 0;
  const bool parsed = header.compare(0, sizeof(kMagic) - 1, kMagic) == 0 &&
                      std::sscanf(header.c_str() + sizeof(kMagic) - 1,
                                  "length %" SCNu64 "\ncrc32 %" SCNx32, &length, &stored) == 2 &&
                      SegmentSealHeader(length, stored) == header;
  if (!parsed) return Status::Corruption(path + ": segment seal (user block header) is damaged");
  if (length != size) {
    return Status::Corruption(path + ": segment is " + std::to_string(size) +
                              " bytes but its seal records " + std::to_string(length) +
                              (size < length ? " (truncated)" : " (extended)"));
  }
  std::uint32_t actual = 0;
  TSTAT_RETURN_IF_ERROR(Crc32OfFileRange(fd.get(), kSegmentUserBlock, length, path, &actual));
  if (actual != stored) {
    char text[96];
    std::snprintf(text, sizeof(text),
                  ": checksum mismatch (crc32 %08" PRIx32 ", sealed %08" PRIx32 ")", actual,
                  stored);
    return Status::Corruption(path + text);
  }
  return Status::OK();
}

}  // namespace tstat::io
