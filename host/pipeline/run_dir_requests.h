// RunDirRequests: the training side of the out-of-process actions of
// `tstat rules --follow` (rules/runtime/actions.h, RunDirActionSink): RUN/STOP makes
// ShouldStop() true; each RUN/capture/*.json asks for raw snapshots of some
// tensors at the next K steps.
//
// Cost model. EndStep calls Poll(); when the last check is at least
// stop_check_interval_ms old (0: always) it does one stat() of RUN/STOP and
// one of RUN/capture/, and lists that directory only when it changed (its
// mtime or inode differs from the last listing, or its mtime is less than
// kRelistSeconds old: directory mtimes have the kernel's coarse clock
// granularity, so two renames within one tick look like one). With steps
// longer than the interval, a stop request is noticed at the first EndStep
// after it appears, i.e. within one step.
//
// With world_size 1 an applied capture file is deleted; with several workers
// (one run directory) every worker applies it and none deletes it: applied
// names are remembered. A damaged capture file (not JSON, not a request, not
// a regular file of at most rules::kMaxCaptureRequestBytes) is renamed to
// <name>.bad and reported once through `warn`; it never stops training nor
// blocks it.
// Thread safety: one thread (EndStep, under the session lock). CheckStopFile
// is thread-safe (the writer thread calls it too).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "host/pipeline/stop_state.h"

namespace tstat::host {

// Largest file read for a stop reason; a larger one (or a FIFO, a device, a
// directory, a symlink loop) is not read. Capture requests: at most
// rules::kMaxCaptureRequestBytes.
inline constexpr std::uint64_t kStopFileMaxBytes = 64 * 1024;

// If anything named `path` exists: stop->Request("stop file <path>: <the
// first line of a small regular file, or why it was not read>"), true.
// Otherwise false. Never blocks.
bool CheckStopFile(const std::string& path, StopState* stop);

class RunDirRequests {
 public:
  static constexpr double kRelistSeconds = 1.0;
  using CaptureFn = std::function<void(const std::string& tensor, int steps)>;
  using WarnFn = std::function<void(const std::string& warning)>;

  RunDirRequests(std::string run_dir, std::int64_t interval_ms, bool delete_applied,
                 CaptureFn capture, WarnFn warn);

  // Checks when due (see above). `stop` gets the stop request; `capture` is
  // called for each tensor of each new capture request.
  void Poll(StopState* stop);
  // Checks now, whatever the interval.
  void CheckNow(StopState* stop);

  std::uint64_t checks() const { return checks_; }
  std::uint64_t listings() const { return listings_; }
  std::uint64_t captures_applied() const { return captures_applied_; }

 private:
  using Clock = std::chrono::steady_clock;
  void CheckCaptureDir();
  void ApplyCaptureFile(const std::string& name);

  std::string stop_path_;
  std::string capture_dir_;
  Clock::duration interval_;
  bool delete_applied_;
  CaptureFn capture_;
  WarnFn warn_;
  Clock::time_point last_check_{};
  bool checked_once_ = false;
  bool stop_seen_ = false;
  // The capture directory as last listed.
  bool listed_ = false;
  ino_t dir_ino_ = 0;
  std::int64_t dir_mtime_ns_ = 0;
  std::set<std::string> applied_;  // remembered when not deleting
  std::uint64_t checks_ = 0;
  std::uint64_t listings_ = 0;
  std::uint64_t captures_applied_ = 0;
};

}  // namespace tstat::host
