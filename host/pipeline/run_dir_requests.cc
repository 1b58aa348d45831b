// RUN/STOP and RUN/capture/ from the training side (run_dir_requests.h).
#include "host/pipeline/run_dir_requests.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "io/h5/posix_file.h"
#include "rules/runtime/actions.h"

namespace tstat::host {
namespace {

std::int64_t MtimeNs(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000ll + st.st_mtim.tv_nsec;
}

std::int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool CheckStopFile(const std::string& path, StopState* stop) {
  // Whatever is named STOP asks for the stop; only a small regular file is
  // read for its reason (a FIFO, /dev/zero or a huge file must not block or
  // flood the training thread).
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return false;
  std::string reason;
  Result<std::string> text = io::ReadRegularFile(path, kStopFileMaxBytes);
  if (text.ok()) {
    reason = text->substr(0, text->find('\n'));
    if (reason.size() > 256) reason.resize(256);
  } else {
    reason = "(reason not read: " + text.status().message() + ")";
  }
  stop->Request("stop file " + path + (reason.empty() ? "" : ": " + reason));
  return true;
}

RunDirRequests::RunDirRequests(std::string run_dir, std::int64_t interval_ms, bool delete_applied,
                               CaptureFn capture, WarnFn warn)
    : stop_path_(run_dir + "/" + rules::kStopFileName),
      capture_dir_(run_dir + "/" + rules::kCaptureDirName),
      interval_(std::chrono::milliseconds(std::max<std::int64_t>(0, interval_ms))),
      delete_applied_(delete_applied),
      capture_(std::move(capture)),
      warn_(std::move(warn)) {}

void RunDirRequests::Poll(StopState* stop) {
  const Clock::time_point now = Clock::now();
  if (checked_once_ && now - last_check_ < interval_) return;
  last_check_ = now;
  checked_once_ = true;
  CheckNow(stop);
}

void RunDirRequests::CheckNow(StopState* stop) {
  ++checks_;
  // The first reason wins and the file is never replaced: one read is enough.
  if (!stop_seen_) stop_seen_ = CheckStopFile(stop_path_, stop);
  CheckCaptureDir();
}

void RunDirRequests::CheckCaptureDir() {
  struct stat st;
  if (::stat(capture_dir_.c_str(), &st) != 0) return;  // no request was ever made
  const std::int64_t mtime = MtimeNs(st);
  const bool changed = !listed_ || st.st_ino != dir_ino_ || mtime != dir_mtime_ns_;
  const bool recent = WallNs() - mtime < static_cast<std::int64_t>(kRelistSeconds * 1e9);
  if (!changed && !recent) return;
  listed_ = true;
  dir_ino_ = st.st_ino;
  dir_mtime_ns_ = mtime;
  ++listings_;
  DIR* d = ::opendir(capture_dir_.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (EndsWith(n, ".json") && !applied_.count(n)) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());  // request order
  for (const std::string& n : names) ApplyCaptureFile(n);
}

void RunDirRequests::ApplyCaptureFile(const std::string& name) {
  const std::string path = capture_dir_ + "/" + name;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;  // deleted meanwhile (a race)
  // Bounded and non-blocking: a FIFO, /dev/zero or a huge file is refused.
  Result<rules::RawCaptureRequest> r = rules::ReadCaptureRequest(path);
  if (!r.ok()) {
    // Keep it from being read again, and say so once (the message names it).
    if (std::rename(path.c_str(), (path + ".bad").c_str()) != 0) applied_.insert(name);
    if (warn_) warn_(r.status().message() + " (renamed to .bad, ignored)");
    return;
  }
  for (const std::string& tensor : r->tensors) {
    if (capture_) capture_(tensor, r->steps);
  }
  ++captures_applied_;
  if (delete_applied_ && ::unlink(path.c_str()) == 0) return;
  applied_.insert(name);
}

}  // namespace tstat::host
