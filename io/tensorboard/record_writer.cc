// See record_writer.h.
#include "io/tensorboard/record_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace tstat::io::tensorboard {
namespace {

// Slicing-by-8 tables of the reflected CRC-32C: table[k][b] is the CRC of
// byte b followed by k zero bytes.
struct Crc32cTables {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  Crc32cTables() {
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? 0x82F63B78u : 0u);
      t[0][b] = c;
    }
    for (std::size_t k = 1; k < 8; ++k) {
      for (std::uint32_t b = 0; b < 256; ++b)
        t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
    }
  }
};

const Crc32cTables& Tables() {
  static const Crc32cTables tables;  // immutable once built (thread-safe static init)
  return tables;
}

void PutLittleEndian(std::string* out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

}  // namespace

std::uint32_t Crc32c(const void* data, std::size_t size, std::uint32_t crc) {
  const auto& t = Tables().t;
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint32_t c = ~crc;
  while (size >= 8) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian host (the framing is little-endian as well)
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

std::uint32_t MaskedCrc32c(const void* data, std::size_t size) {
  const std::uint32_t crc = Crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

Result<std::unique_ptr<RecordWriter>> RecordWriter::Create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) return Status::FailedPrecondition(path + ": exists (not overwritten)");
    return ErrnoStatus(path, "create", err);
  }
  return std::unique_ptr<RecordWriter>(new RecordWriter(path, UniqueFd(fd)));
}

RecordWriter::~RecordWriter() { (void)Close(); }

Status RecordWriter::Write(std::string_view record) {
  if (closed_) return Status::FailedPrecondition(path_ + ": closed");
  if (!status_.ok()) return status_;
  std::string header;
  PutLittleEndian(&header, record.size(), 8);
  const std::uint32_t header_crc = MaskedCrc32c(header.data(), header.size());
  buffer_ += header;
  PutLittleEndian(&buffer_, header_crc, 4);
  buffer_.append(record.data(), record.size());
  PutLittleEndian(&buffer_, MaskedCrc32c(record.data(), record.size()), 4);
  if (buffer_.size() >= kBufferBytes) return Flush();
  return Status::OK();
}

Status RecordWriter::Flush() {
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_.get(), buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status_ = ErrnoStatus(path_, "write", n < 0 ? errno : ENOSPC);
      buffer_.clear();
      return status_;
    }
    done += static_cast<std::size_t>(n);
  }
  written_ += buffer_.size();
  buffer_.clear();
  return Status::OK();
}

Status RecordWriter::Close() {
  if (closed_) return status_;
  closed_ = true;
  if (status_.ok()) (void)Flush();
  if (status_.ok() && ::fsync(fd_.get()) != 0) status_ = ErrnoStatus(path_, "fsync", errno);
  fd_ = UniqueFd();
  return status_;
}

}  // namespace tstat::io::tensorboard
