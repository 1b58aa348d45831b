// Actions: what happens when a rule fires - record (findings log), print
// (one line), stop training, capture raw snapshots of the tensor involved.
//
// Stopping and capturing need the training process. ActionSink is that
// connection:
//  - in-process, the session implements it (RequestStop ->
//    Session::RequestStop(reason); RequestRawCapture -> raw snapshots of
//    those tensors at its next `steps` steps);
//  - out-of-process, RunDirActionSink writes files into the run directory,
//    which the training process polls:
//      RUN/STOP                one line, the JSON form of
//                              tstat.rulesconfig.StopRequest; written to a
//                              temporary file and renamed (atomic); never
//                              replaced once there (the first reason wins).
//      RUN/capture/<id>.json   the JSON form of tstat.rulesconfig.
//                              CaptureRequest, also tmp + rename; the training
//                              side applies and deletes each file
//                              (ListCaptureRequests() reads them).
// ActionRunner applies each rule's configured actions (rules_config.h) to
// its episodes (rules/engine/episodes.h): when one opens it is recorded, printed
// (one line per episode, not per step), and stops training or asks for raw
// snapshots; when it escalates or closes it is recorded.
// Thread safety: ActionRunner and RunDirActionSink are used by one thread; an
// ActionSink implementation must accept calls from the rules thread.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "rules/engine/episodes.h"
#include "rules/engine/rules_config.h"
#include "rules/runtime/findings_log.h"
#include "tstat/rule.h"

namespace tstat::rules {

inline constexpr char kStopFileName[] = "STOP";
inline constexpr char kCaptureDirName[] = "capture";
// A capture request is a few hundred bytes; a larger file is not one.
inline constexpr std::uint64_t kMaxCaptureRequestBytes = 1 << 20;

struct StopRequest {
  std::string rule;
  StepKey step;
  int worker = 0;
  std::string reason;
  // "rule grad_blowup at step 12: <reason>" (for Session::RequestStop).
  std::string Describe() const;
};

struct RawCaptureRequest {
  std::string rule;
  StepKey step;
  std::vector<std::string> tensors;
  int steps = 0;  // capture at this many of the next steps
};

class ActionSink {
 public:
  virtual ~ActionSink() = default;
  virtual Status RequestStop(const StopRequest& request) = 0;
  virtual Status RequestRawCapture(const RawCaptureRequest& request) = 0;
};

// The out-of-process sink: files in `run_dir` (see above).
class RunDirActionSink final : public ActionSink {
 public:
  explicit RunDirActionSink(std::string run_dir) : run_dir_(std::move(run_dir)) {}
  Status RequestStop(const StopRequest& request) override;
  Status RequestRawCapture(const RawCaptureRequest& request) override;

 private:
  std::string run_dir_;
  std::uint64_t sequence_ = 0;
};

// For the training side: parse RUN/STOP, list RUN/capture/*.json (sorted by
// name, i.e. by request time). Damaged files are kCorruption naming them.
std::string StopRequestToJson(const StopRequest& request);
Result<StopRequest> ParseStopRequest(const std::string& text);
// One RUN/capture/*.json file's text; kCorruption when it is not one.
Result<RawCaptureRequest> ParseCaptureRequest(const std::string& text);
// The capture request at `path`, read bounded and without blocking
// (io::ReadRegularFile, kMaxCaptureRequestBytes); every error names `path`
// (kNotFound when it is gone).
Result<RawCaptureRequest> ReadCaptureRequest(const std::string& path);
Result<std::vector<std::pair<std::string, RawCaptureRequest>>> ListCaptureRequests(
    const std::string& run_dir);

// A step in the user's terms: "TRAIN step 12 (global 14)", "step 7" for a
// GLOBAL step.
std::string FormatStep(const StepKey& step);
// One line for a person: "TRAIN step 12 (global 14) worker 0: grad_blowup
// [expression] gradient/fc1.weight: <message>".
std::string FormatFinding(const Finding& finding);
// One line per episode: "TRAIN steps 40-47 (global 48-57, 8 steps) worker 0:
// dead_relu [error] relu1_output: <its first message>; worst dead_percent 98
// at TRAIN step 45" (a one-step episode: "TRAIN step 40 ...").
std::string FormatEpisode(const Episode& episode);

// When training stops: at or above `stop_on`, or never.
struct StopPolicy {
  Severity stop_on = Severity::kCritical;
  bool never = false;
  // "critical" (default), "error", "warning", "info", "never"; false for
  // anything else.
  static bool Parse(const std::string& text, StopPolicy* out);
  std::string ToString() const;
};

class ActionRunner {
 public:
  struct Options {
    std::map<std::string, RuleActions> actions;  // by rule name; others: RuleActions{}
    FindingsLogWriter* log = nullptr;            // null: nothing is recorded
    ActionSink* sink = nullptr;                  // null: stop/capture are not possible
    std::ostream* print = nullptr;               // null: nothing is printed
    StopPolicy stop;  // for rules whose actions leave stop_training unset
  };
  explicit ActionRunner(Options options) : options_(std::move(options)) {}

  // Applies the actions of the event's rule: an episode that opens is
  // recorded and printed, may stop training and capture raw snapshots; one
  // that escalates or closes is recorded (and an escalation may stop). Stop
  // is requested once per run; a capture is not requested again for a
  // tensor whose previous capture still covers the step. Returns the first
  // error (the other actions still run).
  Status Handle(const EpisodeEvent& event);

  // Whether an episode of `rule` with `severity` stops training.
  bool Stops(const std::string& rule, Severity severity) const;
  bool stop_requested() const { return stop_requested_; }
  std::uint64_t recorded() const { return recorded_; }
  std::uint64_t capture_requests() const { return capture_requests_; }

 private:
  const RuleActions& ActionsOf(const std::string& rule) const;

  Options options_;
  bool stop_requested_ = false;
  std::uint64_t recorded_ = 0;
  std::uint64_t capture_requests_ = 0;
  std::map<std::string, std::int64_t> captured_until_;  // tensor -> last global step covered
};

}  // namespace tstat::rules
