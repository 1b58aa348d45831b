// Rules: host-side judges of the reduced statistics.
//
// A rule sees complete steps of one worker in step order (StepView) and emits
// findings. The same rule objects run in-process (fed by the capture pipeline,
// no file round trip), out-of-process on a live run (`tstat rules RUN
// --follow`) and on a finished run (`tstat check RUN`). Rules consume
// statistics, never raw tensors.
//
// Thread safety: a Rule instance is driven by one thread (the rule engine's).
// RuleRegistry is an explicit registry object: the built-ins are added by
// RegisterBuiltinRules(); nothing global is mutated behind the caller's back.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tstat/export.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat {

// How much a finding matters. By default training stops on kCritical
// findings (the run is wasted: non-finite values, divergence, a network that
// cannot learn); InProcessRulesConfig::stop_on and a rule's actions change that.
enum class Severity : std::uint8_t { kInfo = 0, kWarning = 1, kError = 2, kCritical = 3 };
inline const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
    case Severity::kCritical:
      return "critical";
  }
  return "unknown";
}
// Accepts info, warning, error, critical (lower case).
inline bool ParseSeverity(const std::string& s, Severity* out) {
  for (Severity v : {Severity::kInfo, Severity::kWarning, Severity::kError, Severity::kCritical}) {
    if (s == SeverityName(v)) {
      *out = v;
      return true;
    }
  }
  return false;
}

// Evidence of a problem, at one step of one worker. Rules report a finding
// at every step where their condition holds; the runners group them into
// episodes (below).
struct Finding {
  std::string rule;  // the rule instance's name (as configured)
  std::string type;  // the rule type, e.g. "vanishing_gradient"
  StepKey step;
  int worker = 0;
  std::string tensor;  // empty for run-level findings (e.g. stalled_training)
  // The first entry is the finding's measure (an episode keeps the finding
  // where it was worst), then what it was compared with: e.g.
  // {"mean_abs", 3e-9}, {"threshold", 1e-7}.
  std::vector<std::pair<std::string, double>> values;
  bool lower_is_worse = false;  // the measure is worse when smaller (mean |g|)
  Severity severity = Severity::kError;
  // Judged steps in a row before this kind of finding opens an episode; 0:
  // the rule's (RuleSpec::confirm_steps).
  int confirm_steps = 0;
  std::string message;  // one line a person can act on
  double wall_time = 0.0;
};

// A problem from the step its condition started to the step it ended: the
// findings of one rule about one tensor (or run-level) of one worker, in one
// mode, at consecutive judged steps. It closes at the first step of that
// mode where the tensor was judged again and the condition no longer held,
// or when the run ends.
struct Episode {
  std::uint64_t id = 0;  // 1, 2, ... in the order episodes opened
  std::string rule, type;
  int worker = 0;
  std::string tensor;
  Severity severity = Severity::kError;  // the highest of its findings
  StepKey first, last;                   // the first and last step it held
  StepKey reported;                      // the step it was reported at: `first` unless the rule
                                         // needs its condition at several steps in a row
  std::uint64_t steps = 0;               // judged steps at which it held
  Finding opening;                       // the finding of its first step
  Finding worst;                         // the finding with the worst measure
  bool open = true;                      // still holding at the last judged step
};

// What a rule needs captured of a tensor it judges. An in-process session
// turns these on for the tensor (at every step of `modes`, up to
// until_step) and lists them in its rules summary.
struct CaptureNeeds {
  bool stats = false;     // the stat set
  bool per_unit = false;  // per-channel statistics along the units' axis (TensorSpec::unit_axis)
  bool band = false;      // exact counts of values <= band_lo and >= band_hi
  double band_lo = 0.0, band_hi = 0.0;
  bool label_counts = false;    // label counts (classes inferred unless configured)
  bool delta = false;           // the change since the previous save
  std::uint8_t modes = 0;       // bit (1 << Mode) per mode
  std::int64_t until_step = 0;  // > 0: only mode steps below this
  bool any() const { return modes != 0; }
  static std::uint8_t ModeBit(Mode m) {
    return static_cast<std::uint8_t>(1u << static_cast<int>(m));
  }
  static std::uint8_t TrainModes() {
    return static_cast<std::uint8_t>(ModeBit(Mode::kTrain) | ModeBit(Mode::kGlobal));
  }
  static std::uint8_t AllModes() {
    return static_cast<std::uint8_t>(TrainModes() | ModeBit(Mode::kEval) | ModeBit(Mode::kPredict));
  }
};

// Lookup of a worker's registered tensors by id.
class TensorCatalog {
 public:
  virtual ~TensorCatalog() = default;
  virtual const TensorInfo* Find(std::uint32_t id) const = 0;
};

// One complete step of one worker, as a rule sees it.
struct StepView {
  int worker = 0;
  StepKey key;
  double wall_time = 0.0;
  const std::vector<TensorStatsRecord>* records = nullptr;  // capture order
  const std::vector<ScalarRecord>* scalars = nullptr;
  const TensorCatalog* catalog = nullptr;
};

// How a rule instance was configured (the JSON form is in proto/ and docs/rules.md).
struct RuleSpec {
  std::string name;                               // instance name; defaults to the type
  std::string type;                               // built-in type or registered custom type
  std::map<std::string, std::string> parameters;  // smdebug-style string parameters
  std::vector<std::string> collection_names;
  std::string tensor_regex;
  std::vector<Mode> modes;  // empty = all modes
  // The severity of the rule's findings; unset: the type's (built-in types)
  // or error.
  std::optional<Severity> severity;
  // Judged steps in a row its condition must hold before an episode opens
  // (the episode then starts at the first of them); unset: the type's, or 1.
  std::optional<int> confirm_steps;
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual const RuleSpec& spec() const = 0;
  // Called once per complete step of each worker, in step order.
  virtual void Evaluate(const StepView& step, std::vector<Finding>* findings) = 0;
  // Called once when the run has ended and every step was evaluated.
  virtual void Finish(std::vector<Finding>* findings) { (void)findings; }
  // A warning to show once (e.g. "tensor_regex matches no tensor"), or empty.
  virtual std::string Diagnostics() const { return {}; }
  // What the rule recognised and deliberately did not report, to show once
  // (e.g. updates skipped by loss scaling), or empty. Not a warning: tstat
  // check --strict does not fail on it.
  virtual std::string Notes() const { return {}; }
  // What this rule needs captured of `tensor` (nothing by default). Called
  // from the training thread, possibly while Evaluate runs: it must read only
  // what the rule fixed at construction.
  virtual CaptureNeeds Needs(const TensorInfo& tensor) const {
    (void)tensor;
    return {};
  }
  // Whether Evaluate reads records' exponent_histogram. A runner over a
  // written run (tstat check) leaves the histograms unread when no rule
  // does (a third of its time). True unless the rule says otherwise.
  virtual bool ReadsExponentHistograms() const { return true; }
};

// A findings log, RUN/findings.jsonl, where the in-process rules and the
// `tstat rules` runner record every episode event (docs/rules.md).
struct FindingsLogContents {
  // The episodes, in opening order (a line of an older log is a one-step
  // episode), each in its last recorded state: `open` until its close line.
  std::vector<Episode> episodes;
  // What opened each episode (the opening finding; an older log's lines).
  std::vector<Finding> findings;
  // The last line has no newline and is not a complete record (a writer is
  // in the middle of it, or was killed there): it is left out.
  bool truncated_tail = false;
};

// Reads a findings log. kNotFound if it does not exist, kIoError if it cannot
// be read, kInvalidArgument if it is not a regular file, kResourceExhausted
// past kMaxFindingsLogBytes, kCorruption naming the line number of a damaged
// line.
inline constexpr std::uint64_t kMaxFindingsLogBytes = 1ull << 30;
TSTAT_EXPORT Result<FindingsLogContents> ReadFindingsLog(const std::string& path);

using RuleFactory = std::function<Result<std::unique_ptr<Rule>>(const RuleSpec&)>;

class RuleRegistry {
 public:
  // kInvalidArgument if `type` is empty or already registered. Inline (like
  // Absorb): rule plugins (tstat/rule_plugin.h) call it without linking tstat.
  Status Register(const std::string& type, RuleFactory factory) {
    if (type.empty()) return Status::InvalidArgument("rule type must not be empty");
    if (!factory) return Status::InvalidArgument("rule type " + type + ": factory is empty");
    if (!factories_.emplace(type, std::move(factory)).second) {
      return Status::InvalidArgument("rule type " + type + " is already registered");
    }
    return Status::OK();
  }
  // Moves every type of `other` into this registry. kInvalidArgument naming
  // the type, and nothing moved, if one is registered here already.
  Status Absorb(RuleRegistry&& other) {
    for (const auto& kv : other.factories_) {
      if (factories_.count(kv.first)) {
        return Status::InvalidArgument("rule type " + kv.first + " is already registered");
      }
    }
    for (auto& kv : other.factories_) factories_.emplace(kv.first, std::move(kv.second));
    other.factories_.clear();
    return Status::OK();
  }
  // kNotFound naming the type and listing the known ones if unknown;
  // kInvalidArgument naming the parameter if a parameter is unknown/mistyped.
  Result<std::unique_ptr<Rule>> Create(const RuleSpec& spec) const;
  std::vector<std::string> types() const;

 private:
  std::map<std::string, RuleFactory> factories_;
};

// Adds every built-in rule type to `registry`.
Status RegisterBuiltinRules(RuleRegistry* registry);

}  // namespace tstat
