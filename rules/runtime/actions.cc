// Actions: the run-directory sink (STOP, capture requests; atomic writes) and
// the ActionRunner that applies each rule's configured actions.
#include "rules/runtime/actions.h"

#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "io/h5/posix_file.h"
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
  return "rule " + rule + " at " + FormatStep(step) + ": " + reason;
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

Result<RawCaptureRequest> ReadCaptureRequest(const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(std::string text, io::ReadRegularFile(path, kMaxCaptureRequestBytes));
  Result<RawCaptureRequest> r = ParseCaptureRequest(text);
  if (!r.ok()) return r.status().WithContext(path);
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
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;  // applied and deleted meanwhile
    Result<RawCaptureRequest> r = ReadCaptureRequest(path);
    if (!r.ok()) return r.status();
    out.emplace_back(path, std::move(r).value());
  }
  return out;
}

namespace {

// One line, whatever the text holds.
std::string OneLine(std::string line) {
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return line;
}

std::string RuleAndTensor(const std::string& rule, const std::string& type, Severity severity,
                          const std::string& tensor) {
  std::string s = rule;
  if (type != rule) s += " (" + type + ")";
  s += " [" + std::string(SeverityName(severity)) + "]";
  if (!tensor.empty()) s += " " + tensor;
  return s;
}

}  // namespace

std::string FormatStep(const StepKey& step) {
  if (step.mode == Mode::kGlobal) return "step " + std::to_string(step.global_step);
  return std::string(ModeName(step.mode)) + " step " + std::to_string(step.mode_step) +
         " (global " + std::to_string(step.global_step) + ")";
}

std::string FormatFinding(const Finding& f) {
  return OneLine(FormatStep(f.step) + " worker " + std::to_string(f.worker) + ": " +
                 RuleAndTensor(f.rule, f.type, f.severity, f.tensor) + ": " + f.message);
}

std::string FormatEpisode(const Episode& e) {
  std::string when;
  if (e.steps <= 1) {
    when = FormatStep(e.first);
  } else if (e.first.mode == Mode::kGlobal) {
    when = "steps " + std::to_string(e.first.global_step) + "-" +
           std::to_string(e.last.global_step) + " (" + std::to_string(e.steps) + " steps)";
  } else {
    when = std::string(ModeName(e.first.mode)) + " steps " + std::to_string(e.first.mode_step) +
           "-" + std::to_string(e.last.mode_step) + " (global " +
           std::to_string(e.first.global_step) + "-" + std::to_string(e.last.global_step) + ", " +
           std::to_string(e.steps) + " steps)";
  }
  std::string line = when + " worker " + std::to_string(e.worker) + ": " +
                     RuleAndTensor(e.rule, e.type, e.severity, e.tensor) + ": " + e.opening.message;
  if (e.steps > 1 && !e.worst.values.empty()) {
    char value[32];
    std::snprintf(value, sizeof value, "%.6g", e.worst.values.front().second);
    line +=
        "; worst " + e.worst.values.front().first + " " + value + " at " + FormatStep(e.worst.step);
  }
  if (e.open) line += " (still open)";
  return OneLine(line);
}

bool StopPolicy::Parse(const std::string& text, StopPolicy* out) {
  if (text == "never") {
    *out = StopPolicy{Severity::kCritical, true};
    return true;
  }
  Severity s;
  if (!ParseSeverity(text, &s)) return false;
  *out = StopPolicy{s, false};
  return true;
}

std::string StopPolicy::ToString() const { return never ? "never" : SeverityName(stop_on); }

const RuleActions& ActionRunner::ActionsOf(const std::string& rule) const {
  static const RuleActions kDefault;
  auto it = options_.actions.find(rule);
  return it == options_.actions.end() ? kDefault : it->second;
}

bool ActionRunner::Stops(const std::string& rule, Severity severity) const {
  const RuleActions& a = ActionsOf(rule);
  if (a.stop_training.has_value()) return *a.stop_training;
  return !options_.stop.never && severity >= options_.stop.stop_on;
}

Status ActionRunner::Handle(const EpisodeEvent& event) {
  const Episode& e = event.episode;
  const RuleActions& a = ActionsOf(e.rule);
  Status first;
  auto keep = [&first](const Status& s) {
    if (!s.ok() && first.ok()) first = s;
  };
  if (a.record && options_.log != nullptr) {
    Status s = options_.log->Append(event);
    if (s.ok()) ++recorded_;
    keep(s);
  }
  if (event.kind == EpisodeEvent::Kind::kClose) return first;
  const bool opened = event.kind == EpisodeEvent::Kind::kOpen;
  if (opened && a.print && options_.print != nullptr) {
    *options_.print << FormatEpisode(e) << std::endl;  // flushed: visible while following
  }
  if (Stops(e.rule, e.severity) && !stop_requested_) {
    if (options_.sink == nullptr) {
      keep(
          Status::FailedPrecondition("rule " + e.rule + ": cannot stop training (no action sink)"));
    } else {
      stop_requested_ = true;
      keep(options_.sink->RequestStop(StopRequest{e.rule, e.last, e.worker, e.opening.message}));
    }
  }
  if (opened && a.capture_raw_steps > 0 && !e.tensor.empty()) {
    auto covered = captured_until_.find(e.tensor);
    const std::int64_t at = e.reported.global_step;
    const bool still = covered != captured_until_.end() && at <= covered->second;
    if (!still) {
      if (options_.sink == nullptr) {
        keep(Status::FailedPrecondition("rule " + e.rule +
                                        ": cannot capture raw snapshots (no action sink)"));
      } else {
        captured_until_[e.tensor] = at + a.capture_raw_steps;
        ++capture_requests_;
        keep(options_.sink->RequestRawCapture(
            RawCaptureRequest{e.rule, e.reported, {e.tensor}, a.capture_raw_steps}));
      }
    }
  }
  return first;
}

}  // namespace tstat::rules
