// The findings log: RUN/findings.jsonl, one JSON object per line - the JSON
// form of tstat.rulesconfig.Finding (proto/tstat_rules.proto):
//   {"rule":"grad_blowup","type":"expression","step":"12","mode":"TRAIN",
//    "mode_step":"12","worker":0,"tensor":"gradient/fc1.weight",
//    "values":{"l2":1234.5},"message":"...","time":1700000000.25}
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

#include "tstat/rule.h"

namespace tstat::rules {

inline constexpr char kFindingsFileName[] = "findings.jsonl";

// One line of the log (no newline).
std::string FindingToJson(const Finding& finding);
// kCorruption describing what is wrong with `line`.
Result<Finding> FindingFromJson(std::string_view line);

class FindingsLogWriter {
 public:
  // Opens `path` for appending, creating it if needed; kIoError otherwise.
  static Result<std::unique_ptr<FindingsLogWriter>> Open(const std::string& path);
  ~FindingsLogWriter();
  FindingsLogWriter(const FindingsLogWriter&) = delete;
  FindingsLogWriter& operator=(const FindingsLogWriter&) = delete;

  // Appends one line; kIoError (naming the file) if the write fails.
  Status Append(const Finding& finding);
  // fsync()s and closes; later calls do nothing.
  Status Close();
  const std::string& path() const { return path_; }

 private:
  FindingsLogWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

struct FindingsLogContents {
  std::vector<Finding> findings;
  // The last line has no newline and is not a complete record (a writer is
  // in the middle of it, or was killed there): it is left out.
  bool truncated_tail = false;
};

// Reads a findings log. kNotFound if it does not exist, kIoError if it cannot
// be read, kCorruption naming the line number of a damaged line.
Result<FindingsLogContents> ReadFindingsLog(const std::string& path);

}  // namespace tstat::rules
