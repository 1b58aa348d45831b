// See background_thread.h.
#include "host/pipeline/background_thread.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tstat::host {

void NameCurrentThread(const char* name) {
  char short_name[16] = {0};
  std::strncpy(short_name, name, sizeof(short_name) - 1);
  (void)pthread_setname_np(pthread_self(), short_name);
}

void LowerCurrentThreadPriority() {
  // On Linux a thread's niceness is its own (PRIO_PROCESS with a thread id).
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int current = ::getpriority(PRIO_PROCESS, tid);
  if (current == -1 && errno != 0) return;
  (void)::setpriority(PRIO_PROCESS, tid, std::min(19, current + kBackgroundNiceIncrement));
}

int UsableProcessors() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

}  // namespace tstat::host
