// The findings log: JSON lines via protobuf's JSON mapping, appended with
// O_APPEND writes, read back tolerating an unfinished last line.
#include "rules/runtime/findings_log.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "io/h5/posix_file.h"
#include "tstat_rules.pb.h"

namespace tstat::rules {
namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status::IoError(path + ": " + what + ": " + std::strerror(errno));
}

std::string ToJsonLine(rulesconfig::Finding* p) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(*p, &out, options).ok()) {
    // Only invalid UTF-8 in a string can fail; keep the line parseable.
    p->set_tensor("<invalid utf-8>");
    p->set_message("<invalid utf-8>");
    p->set_rule("<invalid utf-8>");
    out.clear();
    (void)google::protobuf::util::MessageToJsonString(*p, &out, options);
  }
  return out;
}

void FillFinding(const Finding& f, rulesconfig::Finding* p) {
  p->set_rule(f.rule);
  p->set_type(f.type);
  p->set_step(f.step.global_step);
  p->set_mode(ModeName(f.step.mode));
  p->set_mode_step(f.step.mode_step);
  p->set_worker(f.worker);
  p->set_tensor(f.tensor);
  auto* values = p->mutable_values();
  for (const auto& [name, value] : f.values) (*values)[name] = value;
  p->set_message(f.message);
  p->set_time(f.wall_time);
  p->set_severity(SeverityName(f.severity));
  p->set_lower_is_worse(f.lower_is_worse);
  if (!f.values.empty()) p->set_measure(f.values.front().first);
}

const char* EventName(EpisodeEvent::Kind k) {
  switch (k) {
    case EpisodeEvent::Kind::kOpen:
      return "open";
    case EpisodeEvent::Kind::kEscalate:
      return "escalate";
    case EpisodeEvent::Kind::kClose:
      return "close";
  }
  return "";
}

// The values of a proto map: `measure` first (the one episodes compare),
// then the rest in name order (JSON objects have no order).
std::vector<std::pair<std::string, double>> Values(
    const google::protobuf::Map<std::string, double>& m, const std::string& measure) {
  std::map<std::string, double> sorted(m.begin(), m.end());
  std::vector<std::pair<std::string, double>> out;
  auto it = sorted.find(measure);
  if (it != sorted.end()) {
    out.push_back(*it);
    sorted.erase(it);
  }
  out.insert(out.end(), sorted.begin(), sorted.end());
  return out;
}

}  // namespace

std::string FindingToJson(const Finding& f) {
  rulesconfig::Finding p;
  FillFinding(f, &p);
  return ToJsonLine(&p);
}

std::string EventToJson(const EpisodeEvent& event) {
  const Episode& e = event.episode;
  rulesconfig::Finding p;
  FillFinding(e.opening, &p);
  const StepKey& at = event.kind == EpisodeEvent::Kind::kOpen ? e.first : e.last;
  p.set_step(at.global_step);
  p.set_mode(ModeName(at.mode));
  p.set_mode_step(at.mode_step);
  p.set_event(EventName(event.kind));
  p.set_episode(e.id);
  p.set_severity(SeverityName(e.severity));
  p.set_first_step(e.first.global_step);
  p.set_first_mode_step(e.first.mode_step);
  p.set_reported_step(e.reported.global_step);
  p.set_reported_mode_step(e.reported.mode_step);
  p.set_steps(e.steps);
  auto* worst = p.mutable_worst();
  for (const auto& [name, value] : e.worst.values) (*worst)[name] = value;
  p.set_worst_step(e.worst.step.global_step);
  p.set_worst_mode_step(e.worst.step.mode_step);
  return ToJsonLine(&p);
}

Result<LogLine> LogLineFromJson(std::string_view line) {
  rulesconfig::Finding p;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // lines of a newer tstat stay readable
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &p, options);
  if (!status.ok()) return Status::Corruption(std::string(status.message()));
  LogLine out;
  Finding& f = out.finding;
  f.rule = p.rule();
  f.type = p.type();
  f.step.global_step = p.step();
  if (!ParseMode(p.mode(), &f.step.mode)) {
    return Status::Corruption("mode \"" + p.mode() + "\" is not a mode");
  }
  f.step.mode_step = p.mode_step();
  f.worker = p.worker();
  f.tensor = p.tensor();
  f.values = Values(p.values(), p.measure());
  f.message = p.message();
  f.wall_time = p.time();
  f.lower_is_worse = p.lower_is_worse();
  if (!p.severity().empty() && !ParseSeverity(p.severity(), &f.severity)) {
    return Status::Corruption("severity \"" + p.severity() + "\" is not a severity");
  }
  if (p.event().empty()) return out;
  out.is_event = true;
  EpisodeEvent& ev = out.event;
  if (p.event() == "open") {
    ev.kind = EpisodeEvent::Kind::kOpen;
  } else if (p.event() == "escalate") {
    ev.kind = EpisodeEvent::Kind::kEscalate;
  } else if (p.event() == "close") {
    ev.kind = EpisodeEvent::Kind::kClose;
  } else {
    return Status::Corruption("event \"" + p.event() + "\" is not open, escalate or close");
  }
  if (p.episode() == 0) return Status::Corruption("an event without an episode id");
  Episode& e = ev.episode;
  e.id = p.episode();
  e.rule = f.rule;
  e.type = f.type;
  e.worker = f.worker;
  e.tensor = f.tensor;
  e.severity = f.severity;
  e.first = StepKey{p.first_step(), f.step.mode, p.first_mode_step()};
  e.last = f.step;
  e.reported = StepKey{p.reported_step(), f.step.mode, p.reported_mode_step()};
  e.steps = p.steps();
  e.opening = f;
  e.opening.step = e.first;
  e.worst = f;
  e.worst.values = Values(p.worst(), p.measure());
  e.worst.step = StepKey{p.worst_step(), f.step.mode, p.worst_mode_step()};
  e.open = ev.kind != EpisodeEvent::Kind::kClose;
  return out;
}

Result<Finding> FindingFromJson(std::string_view line) {
  TSTAT_ASSIGN_OR_RETURN(LogLine l, LogLineFromJson(line));
  return std::move(l.finding);
}

Result<std::unique_ptr<FindingsLogWriter>> FindingsLogWriter::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot open the findings log", path);
  return std::unique_ptr<FindingsLogWriter>(new FindingsLogWriter(path, fd));
}

FindingsLogWriter::~FindingsLogWriter() { (void)Close(); }

Status FindingsLogWriter::Append(const EpisodeEvent& event) {
  return AppendLine(EventToJson(event) + "\n");
}

Status FindingsLogWriter::Append(const Finding& finding) {
  return AppendLine(FindingToJson(finding) + "\n");
}

Status FindingsLogWriter::AppendLine(const std::string& line) {
  if (fd_ < 0) return Status::FailedPrecondition(path_ + ": the findings log is closed");
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot append to the findings log", path_);
    }
    done += static_cast<std::size_t>(n);
  }
  return Status::OK();
}

Status FindingsLogWriter::Close() {
  if (fd_ < 0) return Status::OK();
  Status s;
  if (::fsync(fd_) != 0) s = Errno("cannot sync the findings log", path_);
  if (::close(fd_) != 0 && s.ok()) s = Errno("cannot close the findings log", path_);
  fd_ = -1;
  return s;
}

}  // namespace tstat::rules

namespace tstat {

Result<FindingsLogContents> ReadFindingsLog(const std::string& path) {
  using namespace rules;  // NOLINT(google-build-using-namespace): the log's codec
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no findings log");
    return Errno("cannot stat the findings log", path);
  }
  Result<std::string> read = io::ReadRegularFile(path, kMaxFindingsLogBytes);
  if (!read.ok()) {
    return Status(read.status().code(), "cannot read the findings log: " + read.status().message());
  }
  const std::string& text = read.value();

  FindingsLogContents out;
  std::map<std::uint64_t, std::size_t> index;  // episode id -> out.episodes
  std::size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    ++line_no;
    const std::size_t end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    const std::string_view line(text.data() + start, (complete ? end : text.size()) - start);
    start = complete ? end + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    Result<LogLine> l = LogLineFromJson(line);
    if (!l.ok()) {
      if (!complete) {  // the unfinished last line of a writer
        out.truncated_tail = true;
        break;
      }
      return Status::Corruption(path + " line " + std::to_string(line_no) + ": " +
                                l.status().message());
    }
    if (!l->is_event) {  // an older log: each line an episode of one step
      Episode e;
      e.id = out.episodes.size() + 1;
      e.rule = l->finding.rule;
      e.type = l->finding.type;
      e.worker = l->finding.worker;
      e.tensor = l->finding.tensor;
      e.severity = l->finding.severity;
      e.first = e.last = e.reported = l->finding.step;
      e.steps = 1;
      e.opening = e.worst = l->finding;
      e.open = false;
      out.episodes.push_back(std::move(e));
      out.findings.push_back(std::move(l->finding));
      continue;
    }
    const Episode& e = l->event.episode;
    auto known = index.find(e.id);
    if (known == index.end()) {
      if (l->event.kind != EpisodeEvent::Kind::kOpen) continue;  // its open line was not kept
      index.emplace(e.id, out.episodes.size());
      out.episodes.push_back(e);
      out.findings.push_back(e.opening);
      continue;
    }
    Episode& have = out.episodes[known->second];
    have.last = e.last;
    have.steps = e.steps;
    have.severity = e.severity;
    have.worst = e.worst;
    have.open = e.open;
  }
  return out;
}

}  // namespace tstat
