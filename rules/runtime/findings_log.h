// The findings log: RUN/findings.jsonl, one JSON object per line - the JSON
// form of tstat.rulesconfig.Finding (proto/tstat_rules.proto), one line per
// episode event (rules/engine/episodes.h): "open", "escalate", "close":
//   {"rule":"grad_blowup","type":"expression","step":"12","mode":"TRAIN",
//    "mode_step":"12","worker":0,"tensor":"gradient/fc1.weight",
//    "values":{"l2":1234.5},"message":"...","time":1700000000.25,
//    "event":"open","episode":"1","severity":"error","first_step":"12",...}
// Logs written before episodes hold one line per finding (no "event").
// (protobuf's JSON mapping: 64-bit integers as strings; NaN/Infinity as
// "NaN"/"Infinity"). Every line is written with one write(2) and so reaches
// readers at once, while training runs; the file is fsync()ed on Close().
// Several writers (the in-process rules and `tstat rules --follow`) may
// append to one file: O_APPEND keeps lines whole.
// Thread safety: a writer is used by one thread; reading is a pure function.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rules/engine/episodes.h"
#include "tstat/rule.h"

namespace tstat::rules {

inline constexpr char kFindingsFileName[] = "findings.jsonl";

// One line of the log (no newline): an episode event, or (logs of earlier
// tstat versions) one finding.
std::string EventToJson(const EpisodeEvent& event);
std::string FindingToJson(const Finding& finding);
// kCorruption describing what is wrong with `line`. FindingFromJson reads
// any line as its finding (an event's: the finding at its step).
Result<Finding> FindingFromJson(std::string_view line);

// One line, parsed: a finding, or an episode event (`is_event`).
struct LogLine {
  bool is_event = false;
  EpisodeEvent event;  // with is_event
  Finding finding;     // the line's finding (an event's: open = its first, close = its last)
};
Result<LogLine> LogLineFromJson(std::string_view line);

class FindingsLogWriter {
 public:
  // Opens `path` for appending, creating it if needed; kIoError otherwise.
  static Result<std::unique_ptr<FindingsLogWriter>> Open(const std::string& path);
  ~FindingsLogWriter();
  FindingsLogWriter(const FindingsLogWriter&) = delete;
  FindingsLogWriter& operator=(const FindingsLogWriter&) = delete;

  // Appends one line; kIoError (naming the file) if the write fails.
  Status Append(const EpisodeEvent& event);
  Status Append(const Finding& finding);
  // fsync()s and closes; later calls do nothing.
  Status Close();
  const std::string& path() const { return path_; }

 private:
  FindingsLogWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  Status AppendLine(const std::string& line);
  std::string path_;
  int fd_ = -1;
};

// The reader is public (tstat/rule.h: tstat::ReadFindingsLog).
using ::tstat::FindingsLogContents;
using ::tstat::kMaxFindingsLogBytes;
using ::tstat::ReadFindingsLog;

}  // namespace tstat::rules
