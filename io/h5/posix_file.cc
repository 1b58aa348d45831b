// See posix_file.h.
#include "io/h5/posix_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tstat::io {
namespace {

using Fd = UniqueFd;

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Status ErrnoStatus(const std::string& path, const char* op, int err) {
  std::string message = path + ": " + op + ": " + std::strerror(err);
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return Status::ResourceExhausted(message);
    case ENOENT:
      return Status::NotFound(message);
    default:
      return Status::IoError(message);
  }
}

std::string DirName(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  return a.back() == '/' ? a + b : a + "/" + b;
}

Status MakeDirs(const std::string& path) {
  if (path.empty() || IsDirectory(path)) return Status::OK();
  const std::string parent = DirName(path);
  if (parent != path) TSTAT_RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(path.c_str(), 0755) != 0) {
    if (errno == EEXIST && IsDirectory(path)) return Status::OK();
    return ErrnoStatus(path, "mkdir", errno);
  }
  return FsyncPath(parent);
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(dir, "opendir", errno);
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoStatus(dir, "readdir", err);
  return names;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<std::uint64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, "stat", errno);
  return static_cast<std::uint64_t>(st.st_size);
}

Status FsyncPath(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(path, "open for fsync", errno);
  if (::fsync(fd.get()) != 0) return ErrnoStatus(path, "fsync", errno);
  if (::close(fd.release()) != 0) return ErrnoStatus(path, "close", errno);
  return Status::OK();
}

Status RenameFile(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus(from, ("rename to " + to).c_str(), errno);
  }
  return Status::OK();
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(path, "unlink", errno);
  return Status::OK();
}

Status WriteNewFileDurably(const std::string& path, const void* data, std::size_t size) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoStatus(path, "create", errno);
  const auto* bytes = static_cast<const char*>(data);
  std::size_t done = 0;
  Status failure;
  while (done < size && failure.ok()) {
    const ssize_t n = ::write(fd.get(), bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failure = ErrnoStatus(path, "write", errno);
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (failure.ok() && ::fsync(fd.get()) != 0) failure = ErrnoStatus(path, "fsync", errno);
  if (failure.ok() && ::close(fd.release()) != 0) failure = ErrnoStatus(path, "close", errno);
  if (!failure.ok()) ::unlink(path.c_str());
  return failure;
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  TSTAT_RETURN_IF_ERROR(WriteNewFileDurably(tmp, contents.data(), contents.size()));
  Status renamed = RenameFile(tmp, path);
  if (!renamed.ok()) {
    ::unlink(tmp.c_str());
    return renamed;
  }
  return FsyncPath(DirName(path));
}

namespace {

// Reads `fd` (of `path`) to its end, at most `max_bytes`.
Result<std::string> ReadToEnd(int fd, const std::string& path, std::uint64_t max_bytes) {
  std::string contents;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(path, "read", errno);
    if (n == 0) break;
    if (contents.size() + static_cast<std::size_t>(n) > max_bytes) {
      return Status::ResourceExhausted(path + ": more than " + std::to_string(max_bytes) +
                                       " bytes; not read");
    }
    contents.append(buffer, static_cast<std::size_t>(n));
  }
  return contents;
}

}  // namespace

Result<std::string> ReadWholeFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(path, "open", errno);
  return ReadToEnd(fd.get(), path, std::numeric_limits<std::uint64_t>::max());
}

Result<UniqueFd> OpenRegularFile(const std::string& path, std::uint64_t* size) {
  // O_NONBLOCK: opening a FIFO without a writer must not block.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return ErrnoStatus(path, "open", errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(path, "fstat", errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(path +
                                   ": not a regular file (a FIFO, device or directory); "
                                   "not read");
  }
  *size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

Result<std::string> ReadRegularFile(const std::string& path, std::uint64_t max_bytes) {
  std::uint64_t size = 0;
  TSTAT_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path, &size));
  if (size > max_bytes) {
    return Status::ResourceExhausted(path + ": " + std::to_string(size) + " bytes, more than the " +
                                     std::to_string(max_bytes) + " this file may have; not read");
  }
  return ReadToEnd(fd.get(), path, max_bytes);  // bounded: it may grow while read
}

Result<std::size_t> PreadUpTo(int fd, void* out, std::size_t bytes, std::uint64_t offset,
                              const std::string& path) {
  auto* p = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(path, "read", errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

Result<std::string> ReadRegularFileRange(const std::string& path, std::uint64_t offset,
                                         std::uint64_t max_bytes) {
  std::uint64_t size = 0;
  TSTAT_ASSIGN_OR_RETURN(UniqueFd fd, OpenRegularFile(path, &size));
  if (offset >= size) return std::string();
  std::string out(static_cast<std::size_t>(std::min(max_bytes, size - offset)), '\0');
  TSTAT_ASSIGN_OR_RETURN(std::size_t done,
                         PreadUpTo(fd.get(), out.data(), out.size(), offset, path));
  out.resize(done);  // cut shorter since the fstat
  return out;
}

Status AppendToFile(const std::string& path, bool create_new, std::uint64_t expected_size,
                    const void* data, std::size_t size, bool* cut_back) {
  *cut_back = true;
  const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
                    (create_new ? O_CREAT | O_EXCL : 0);
  Fd fd(::open(path.c_str(), flags, 0644));
  if (fd.get() < 0) return ErrnoStatus(path, create_new ? "create" : "open for append", errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(path, "fstat", errno);
  if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != expected_size) {
    return Status::FailedPrecondition(path + ": not the regular file of " +
                                      std::to_string(expected_size) +
                                      " bytes this writer left; not appended to");
  }
  const auto* bytes = static_cast<const char*>(data);
  std::size_t done = 0;
  Status failure;
  while (done < size) {
    const ssize_t n = ::write(fd.get(), bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failure = n < 0 ? ErrnoStatus(path, "write", errno)
                      : Status::IoError(path + ": write wrote nothing");
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (failure.ok() && ::close(fd.release()) != 0) failure = ErrnoStatus(path, "close", errno);
  if (!failure.ok() && done > 0) {
    *cut_back = ::truncate(path.c_str(), static_cast<off_t>(expected_size)) == 0;
  }
  return failure;
}

void AdviseHugePages(void* data, std::size_t bytes) {
#if defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + kHugePage - 1) / kHugePage * kHugePage;
  const std::uintptr_t last = (begin + bytes) / kHugePage * kHugePage;
  if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace tstat::io
