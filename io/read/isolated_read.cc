// See isolated_read.h.
#include "io/read/isolated_read.h"

#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "io/h5/h5_lock.h"
#include "io/read/segment_reader.h"

namespace tstat::io {

Status CheckSegmentInChild(const std::string& path, double timeout_s) {
  pid_t pid = -1;
  {
    H5Lock lock;
    pid = fork();
    if (pid == 0) {
      // The child: this thread holds the (copied) HDF5 lock.
      const bool ok = ReadSegmentLocked(path).ok();
      _exit(ok ? 0 : 3);
    }
  }
  if (pid < 0) {
    return Status::Internal(path + ": cannot start a child process to read it: " + strerror(errno));
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_s > 0 ? timeout_s : 0));
  int status = 0;
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return Status::Internal(path + ": waiting for the reading child failed: " + strerror(errno));
    }
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return Status::Corruption(path + ": reading it took over " + std::to_string(timeout_s) +
                                " s in a child process (libhdf5 hung on its metadata): skipped");
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(20)) pause *= 2;
  }
  // The child exits 0 (read) or 3 (refused, with an error the caller will
  // see again); anything else means it did not get through libhdf5 (a
  // sanitizer's report exits with its own code).
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3) {
    return Status::Corruption(path + ": reading it ended a child process with exit code " +
                              std::to_string(WEXITSTATUS(status)) +
                              ": HDF5 metadata crafted or damaged past what tstat checks "
                              "before libhdf5 parses it: skipped");
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return Status::Corruption(path + ": reading it killed a child process (signal " +
                              std::to_string(sig) + ", " + strsignal(sig) +
                              "): HDF5 metadata crafted or damaged past what tstat checks "
                              "before libhdf5 parses it: skipped");
  }
  return Status::OK();
}

}  // namespace tstat::io
