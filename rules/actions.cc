// Actions: the run-directory sink (STOP, capture requests; atomic writes) and
// the ActionRunner that applies each rule's configured actions.
#include "rules/actions.h"

#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tstat_rules.pb.h"

namespace tstat::rules {
namespace {

std::string ToJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

Status FromJson(const std::string& text, google::protobuf::Message* m, const std::string& what) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto s = google::protobuf::util::JsonStringToMessage(text, m, options);
  if (!s.ok()) return Status::Corruption(what + ": " + std::string(s.message()));
  return Status::OK();
}

// Writes `text` to `path` atomically: a temporary file in the same
// directory, synced, then renamed over `path`.
Status WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(tmp + ": cannot create: " + std::strerror(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::IoError(tmp + ": cannot write: " + err);
    }
    done += static_cast<std::size_t>(n);
  }
  (void)::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::IoError(path + ": cannot rename into place: " + err);
  }
  return Status::OK();
}

}  // namespace

std::string StopRequest::Describe() const {
  return "rule " + rule + " at step " + std::to_string(step.global_step) + ": " + reason;
}

std::string StopRequestToJson(const StopRequest& r) {
  rulesconfig::StopRequest p;
  p.set_rule(r.rule);
  p.set_step(r.step.global_step);
  p.set_mode(ModeName(r.step.mode));
  p.set_mode_step(r.step.mode_step);
  p.set_worker(r.worker);
  p.set_reason(r.reason);
  return ToJson(p);
}

Result<StopRequest> ParseStopRequest(const std::string& text) {
  rulesconfig::StopRequest p;
  TSTAT_RETURN_IF_ERROR(FromJson(text, &p, "stop request"));
  StopRequest r;
  r.rule = p.rule();
  r.step.global_step = p.step();
  if (!p.mode().empty() && !ParseMode(p.mode(), &r.step.mode)) {
    return Status::Corruption("stop request: mode \"" + p.mode() + "\" is not a mode");
  }
  r.step.mode_step = p.mode_step();
  r.worker = p.worker();
  r.reason = p.reason();
  return r;
}

Status RunDirActionSink::RequestStop(const StopRequest& request) {
  const std::string path = run_dir_ + "/" + kStopFileName;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return Status::OK();  // the first reason wins
  return WriteAtomically(path, StopRequestToJson(request) + "\n");
}

Status RunDirActionSink::RequestRawCapture(const RawCaptureRequest& request) {
  const std::string dir = run_dir_ + "/" + kCaptureDirName;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::IoError(dir + ": cannot create: " + std::strerror(errno));
  }
  rulesconfig::CaptureRequest p;
  p.set_rule(request.rule);
  p.set_step(request.step.global_step);
  for (const std::string& t : request.tensors) p.add_tensors(t);
  p.set_steps(request.steps);
  // Names sort by request time; pid and sequence keep them unique.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  char name[96];
  std::snprintf(name, sizeof name, "%020lld-%d-%06llu.json", static_cast<long long>(ns),
                static_cast<int>(::getpid()), static_cast<unsigned long long>(sequence_++));
  return WriteAtomically(dir + "/" + name, ToJson(p) + "\n");
}

Result<RawCaptureRequest> ParseCaptureRequest(const std::string& text) {
  rulesconfig::CaptureRequest p;
  TSTAT_RETURN_IF_ERROR(FromJson(text, &p, "capture request"));
  RawCaptureRequest r;
  r.rule = p.rule();
  r.step.global_step = p.step();
  r.tensors.assign(p.tensors().begin(), p.tensors().end());
  r.steps = p.steps();
  return r;
}

Result<std::vector<std::pair<std::string, RawCaptureRequest>>> ListCaptureRequests(
    const std::string& run_dir) {
  const std::string dir = run_dir + "/" + kCaptureDirName;
  std::vector<std::pair<std::string, RawCaptureRequest>> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return Status::IoError(dir + ": cannot list: " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    const std::string path = dir + "/" + n;
    std::ifstream in(path);
    if (!in) continue;  // applied and deleted meanwhile
    std::ostringstream text;
    text << in.rdbuf();
    Result<RawCaptureRequest> r = ParseCaptureRequest(text.str());
    if (!r.ok()) return r.status().WithContext(path);
    out.emplace_back(path, std::move(r).value());
  }
  return out;
}

std::string FormatFinding(const Finding& f) {
  std::string line = "step " + std::to_string(f.step.global_step);
  if (f.step.mode != Mode::kGlobal) {
    line += " (" + std::string(ModeName(f.step.mode)) + " " + std::to_string(f.step.mode_step) + ")";
  }
  line += " worker " + std::to_string(f.worker) + ": " + f.rule;
  if (f.type != f.rule) line += " [" + f.type + "]";
  if (!f.tensor.empty()) line += " " + f.tensor;
  line += ": " + f.message;
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';  // one line, whatever the message
  }
  return line;
}

Status ActionRunner::Handle(const Finding& f) {
  RuleActions a;
  auto it = options_.actions.find(f.rule);
  if (it != options_.actions.end()) a = it->second;
  Status first;
  auto keep = [&first](const Status& s) {
    if (!s.ok() && first.ok()) first = s;
  };
  if (a.record && options_.log != nullptr) {
    Status s = options_.log->Append(f);
    if (s.ok()) ++recorded_;
    keep(s);
  }
  if (a.print && options_.print != nullptr) {
    *options_.print << FormatFinding(f) << std::endl;  // flushed: visible while following
  }
  if (a.stop_training && !stop_requested_) {
    if (options_.sink == nullptr) {
      keep(Status::FailedPrecondition("rule " + f.rule + ": cannot stop training (no action sink)"));
    } else {
      stop_requested_ = true;
      keep(options_.sink->RequestStop(StopRequest{f.rule, f.step, f.worker, f.message}));
    }
  }
  if (a.capture_raw_steps > 0 && !f.tensor.empty()) {
    auto covered = captured_until_.find(f.tensor);
    const bool still = covered != captured_until_.end() && f.step.global_step <= covered->second;
    if (!still) {
      if (options_.sink == nullptr) {
        keep(Status::FailedPrecondition("rule " + f.rule +
                                        ": cannot capture raw snapshots (no action sink)"));
      } else {
        captured_until_[f.tensor] = f.step.global_step + a.capture_raw_steps;
        ++capture_requests_;
        keep(options_.sink->RequestRawCapture(
            RawCaptureRequest{f.rule, f.step, {f.tensor}, a.capture_raw_steps}));
      }
    }
  }
  return first;
}

}  // namespace tstat::rules
