// See isolated_read.h.
#include "io/read/isolated_read.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/h5/h5_lock.h"
#include "io/read/segment_reader.h"

namespace tstat::io {
namespace {

// Paths longer than this are not sent (none of a run's are).
constexpr std::uint32_t kMaxPathBytes = 1 << 16;

bool WriteAll(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);  // no SIGPIPE if the child died
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// The child: walks each requested segment (WalkSegmentLocked), answers '0' (read) or '3'
// (refused, with an error the parent will see again), until the socket
// closes. Runs nothing but this, then _exit.
[[noreturn]] void Serve(int fd) {
  // One registry memo per worker directory, as the parent keeps.
  std::map<std::string, RegistryMemo> memos;
  for (;;) {
    std::uint32_t size = 0;
    // Bit 0: the seal is verified; bit 1: records only; bit 2: not the
    // stats table.
    char flags = 0;
    if (!ReadAll(fd, &flags, 1) || !ReadAll(fd, &size, sizeof size) || size > kMaxPathBytes) {
      _exit(0);
    }
    std::string path(size, '\0');
    if (!ReadAll(fd, path.data(), size)) _exit(0);
    RegistryMemo& memo = memos[path.substr(0, path.rfind('/') + 1)];
    const char reply =
        WalkSegmentLocked(path, &memo, (flags & 1) != 0, (flags & 2) != 0, (flags & 4) == 0).ok()
            ? '0'
            : '3';
    if (!WriteAll(fd, &reply, 1)) _exit(0);
  }
}

std::string Died(const std::string& path, int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return path + ": reading it killed a child process (signal " + std::to_string(sig) + ", " +
           strsignal(sig) +
           "): HDF5 metadata crafted or damaged past what tstat checks before libhdf5 parses "
           "it: skipped";
  }
  // A sanitizer's report exits with its own code.
  return path + ": reading it ended a child process with exit code " +
         std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
         ": HDF5 metadata crafted or damaged past what tstat checks before libhdf5 parses it: "
         "skipped";
}

}  // namespace

IsolatedSegmentReads::~IsolatedSegmentReads() {
  // Killed, not asked: it holds nothing, and waiting for it to see the end
  // of file could wait on any process that inherited the socket.
  if (pid_ > 0) Stop(/*kill=*/true);
}

Status IsolatedSegmentReads::Start(const std::string& path) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::Internal(path + ": cannot start a child process to read it: " + strerror(errno));
  }
  pid_t pid = -1;
  {
    H5Lock lock;
    pid = ::fork();
    if (pid == 0) {
      // The child: this thread holds the (copied) HDF5 lock. It keeps its
      // socket and stdio only: another reader's socket inherited here would
      // keep that reader's child from seeing its end of file.
      const auto keep = static_cast<unsigned>(fds[1]);
      if (keep > 3) ::close_range(3, keep - 1, 0);
      ::close_range(keep + 1, ~0u, 0);
      Serve(fds[1]);
    }
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return Status::Internal(path + ": cannot start a child process to read it: " + strerror(errno));
  }
  pid_ = pid;
  socket_ = fds[0];
  ++started_;
  return Status::OK();
}

int IsolatedSegmentReads::Stop(bool kill) {
  if (socket_ >= 0) ::close(socket_);  // the child sees end of file and exits
  socket_ = -1;
  if (kill) ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

Status IsolatedSegmentReads::Check(const std::string& path, bool seal_verified, bool records_only,
                                   bool stats_table) {
  if (path.size() > kMaxPathBytes) return Status::Internal(path + ": path too long to send");
  if (pid_ <= 0) TSTAT_RETURN_IF_ERROR(Start(path));
  const char flags =
      static_cast<char>((seal_verified ? 1 : 0) | (records_only ? 2 : 0) | (stats_table ? 0 : 4));
  const auto size = static_cast<std::uint32_t>(path.size());
  if (!WriteAll(socket_, &flags, 1) || !WriteAll(socket_, &size, sizeof size) ||
      !WriteAll(socket_, path.data(), path.size())) {
    return Status::Corruption(Died(path, Stop(/*kill=*/true)));
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_s_ > 0 ? timeout_s_ : 0));
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      Stop(/*kill=*/true);
      return Status::Corruption(path + ": reading it took over " + std::to_string(timeout_s_) +
                                " s in a child process (libhdf5 hung on its metadata): skipped");
    }
    pollfd p{socket_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Status::Internal(path + ": waiting for the reading child failed");
    if (ready == 0) continue;
    char reply = 0;
    const ssize_t r = ::read(socket_, &reply, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r == 1 && (reply == '0' || reply == '3')) return Status::OK();
    // End of file: the child died reading it.
    return Status::Corruption(Died(path, Stop(/*kill=*/r == 1)));
  }
}

}  // namespace tstat::io
