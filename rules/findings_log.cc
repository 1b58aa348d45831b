// The findings log: JSON lines via protobuf's JSON mapping, appended with
// O_APPEND writes, read back tolerating an unfinished last line.
#include "rules/findings_log.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tstat_rules.pb.h"

namespace tstat::rules {
namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status::IoError(path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

std::string FindingToJson(const Finding& f) {
  rulesconfig::Finding p;
  p.set_rule(f.rule);
  p.set_type(f.type);
  p.set_step(f.step.global_step);
  p.set_mode(ModeName(f.step.mode));
  p.set_mode_step(f.step.mode_step);
  p.set_worker(f.worker);
  p.set_tensor(f.tensor);
  auto* values = p.mutable_values();
  for (const auto& [name, value] : f.values) (*values)[name] = value;
  p.set_message(f.message);
  p.set_time(f.wall_time);
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(p, &out, options).ok()) {
    // Only invalid UTF-8 in a string can fail; keep the line parseable.
    p.set_tensor("<invalid utf-8>");
    p.set_message("<invalid utf-8>");
    out.clear();
    (void)google::protobuf::util::MessageToJsonString(p, &out, options);
  }
  return out;
}

Result<Finding> FindingFromJson(std::string_view line) {
  rulesconfig::Finding p;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // lines of a newer tstat stay readable
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &p, options);
  if (!status.ok()) return Status::Corruption(std::string(status.message()));
  Finding f;
  f.rule = p.rule();
  f.type = p.type();
  f.step.global_step = p.step();
  if (!ParseMode(p.mode(), &f.step.mode)) {
    return Status::Corruption("mode \"" + p.mode() + "\" is not a mode");
  }
  f.step.mode_step = p.mode_step();
  f.worker = p.worker();
  f.tensor = p.tensor();
  for (const auto& [name, value] : p.values()) f.values.emplace_back(name, value);
  f.message = p.message();
  f.wall_time = p.time();
  return f;
}

Result<std::unique_ptr<FindingsLogWriter>> FindingsLogWriter::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot open the findings log", path);
  return std::unique_ptr<FindingsLogWriter>(new FindingsLogWriter(path, fd));
}

FindingsLogWriter::~FindingsLogWriter() { (void)Close(); }

Status FindingsLogWriter::Append(const Finding& finding) {
  if (fd_ < 0) return Status::FailedPrecondition(path_ + ": the findings log is closed");
  const std::string line = FindingToJson(finding) + "\n";
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

Result<FindingsLogContents> ReadFindingsLog(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no findings log");
    return Errno("cannot stat the findings log", path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(path + ": cannot read the findings log");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": error reading the findings log");
  const std::string text = buffer.str();

  FindingsLogContents out;
  std::size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    ++line_no;
    const std::size_t end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    const std::string_view line(text.data() + start, (complete ? end : text.size()) - start);
    start = complete ? end + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    Result<Finding> f = FindingFromJson(line);
    if (!f.ok()) {
      if (!complete) {  // the unfinished last line of a writer
        out.truncated_tail = true;
        break;
      }
      return Status::Corruption(path + " line " + std::to_string(line_no) + ": " +
                                f.status().message());
    }
    out.findings.push_back(std::move(f).value());
  }
  return out;
}

}  // namespace tstat::rules
