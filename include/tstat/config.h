// SessionConfig: what a capture session saves, when, and how.
//
// The C++ mirror of the protobuf schema proto/tstat_config.proto; config files
// are that schema's JSON form. Build a SessionConfig in code, or parse one
// with ParseConfigJson/LoadConfigFile.
//
// Schedules follow smdebug's SaveConfig: a step is saved when its MODE step is
// listed in save_steps, or when start_step <= s < end_step (end exclusive) and
// s % save_interval == 0 (absolute modulus: start 150, interval 100 saves 200,
// 300, ...). save_interval 0 saves only the listed steps. std::optional fields
// are inherited when unset, field by field, most specific first:
//   collection.<mode>  >  collection (base)  >  session.<mode>  >  session (base)
//   >  built-in default (interval 100, start 0, no end; raw snapshots: never).
// A non-empty save_steps counts as set. Built-in collections carry their own
// settings under the user's (gradients: never in EVAL/PREDICT, as smdebug).
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tstat/export.h"
#include "tstat/stats.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat {

// One mode's schedule (smdebug SaveConfigMode).
struct SaveSchedule {
  std::optional<std::int64_t> save_interval;
  std::vector<std::int64_t> save_steps;
  std::optional<std::int64_t> start_step;
  std::optional<std::int64_t> end_step;  // exclusive
};

// A base schedule for every mode plus per-mode overrides.
struct SaveConfig {
  SaveSchedule base;
  SaveSchedule train, eval, predict, global;

  SaveSchedule& ForMode(Mode mode) {
    switch (mode) {
      case Mode::kTrain:
        return train;
      case Mode::kEval:
        return eval;
      case Mode::kPredict:
        return predict;
      case Mode::kGlobal:
        break;
    }
    return global;
  }
  const SaveSchedule& ForMode(Mode mode) const {
    return const_cast<SaveConfig*>(this)->ForMode(mode);
  }
  // Convenience: sets base.save_interval.
  static SaveConfig Every(std::int64_t interval) {
    SaveConfig c;
    c.base.save_interval = interval;
    return c;
  }
};

// Which statistics are computed; unset fields inherit, and end up as the
// defaults of tstat::StatsOptions (cheap set + exponent histogram).
struct StatsConfig {
  std::optional<bool> exponent_histogram;
  std::optional<int> histogram_bins;   // linear histogram; 0 = off
  std::optional<double> histogram_lo;  // fixed range when lo and hi are both set
  std::optional<double> histogram_hi;
  std::optional<int> per_channel_axis;  // -1 = off
  std::optional<int> label_classes;     // > 0: label counts instead of the stat set
  std::optional<std::int64_t> sample_count;
  std::optional<double> band_lo, band_hi, small_eps;
  // Delta against the tensor's previous save (the session keeps a copy of the
  // saved values: host memory for host tensors; device memory, within
  // pipeline.delta_memory_cap_bytes, for CUDA tensors).
  std::optional<bool> delta;
  std::optional<double> delta_atol, delta_rtol;
  // Label tensors: confusion matrix against this registered tensor's values
  // (class ids, or logits [n, label_classes] with confusion_argmax).
  std::optional<std::string> confusion_predictions;
  std::optional<bool> confusion_argmax;
  std::vector<std::int64_t> count_values;  // integer tensors; at most 64; non-empty = set
};

// Names of the built-in collections.
inline constexpr const char* kBuiltinCollections[] = {
    "weights", "biases", "gradients", "activations", "inputs",
    "labels",  "losses", "scalars",   "default",     "all"};

// A named set of tensors. A tensor belongs to a collection when it was
// registered with that collection's name, when its name is in tensor_names,
// or when some include_regex matches part of it (RE2, like Python's
// re.search) and no exclude_regex does. `default` holds the registered tensors
// no other collection selects; `all` matches everything (not captured unless
// listed in include_collections).
struct CollectionConfig {
  std::string name;
  std::vector<std::string> include_regex;  // for a built-in: replaces its regexes
  std::vector<std::string> exclude_regex;
  std::vector<std::string> tensor_names;
  SaveConfig save_config;
  SaveConfig raw_save_config;
  StatsConfig stats;
};

// The capture pipeline (see tstat/session.h).
struct PipelineConfig {
  std::int64_t queue_capacity = 64;                 // steps queued for the writer
  std::int64_t raw_memory_cap_bytes = 256ll << 20;  // raw snapshot bytes in flight
  // Device memory for the previous values of CUDA tensors with stats.delta
  // (one copy per tensor); a tensor that does not fit gets no delta and a
  // DropRecord says so.
  std::int64_t delta_memory_cap_bytes = 256ll << 20;
  double flush_interval_seconds = 1.0;    // flush at least this often
  std::int64_t flush_interval_steps = 0;  // and every N steps (0 = off)
  bool drop_stats_when_full = false;      // false: the step waits
  // Tensors captured early in the background (Session::CaptureEarly with
  // kInBackground: the Python hook's large CPU layer outputs) are reduced
  // on a capture thread while training goes on, where the process may run
  // on two processors or more; false: on the training thread, before
  // CaptureEarly returns.
  bool early_capture_thread = true;
  // The capture thread drops each tensor it has read from the processors'
  // caches (x86-64 clflushopt; nothing elsewhere), so that the training
  // thread, writing over that memory later, does not have to take the lines
  // back from the capture thread's core (host/session/cache_eviction.h).
  bool early_capture_evict = true;
  // RUN/STOP and RUN/capture/ are checked at EndStep when the last check is
  // at least this old (0: at every EndStep; one stat() each, ~1 us), and by
  // the writer thread every max(this, 100) ms (a training thread that is
  // not stepping still sees ShouldStop turn true).
  std::int64_t stop_check_interval_ms = 1;
  int cpu_threads = 0;  // 0: chosen per step, SessionCpuThreads (below)
  int cuda_device = 0;
  int cuda_inflight = 2;  // steps reducing on the GPU at once
  // HDF5 deflate level of the stats tables. 1 (default): tstat's own
  // deflate (io/codec/run_length_deflate.h: runs, and each row against the same
  // row one step earlier), 1.3-2.4x less writer CPU than libdeflate's 4 on
  // statistics that change every step for 1-6% more bytes, and up to 2x
  // the (few) bytes when steps repeat each other; 2-9: libdeflate.
  int compression_level = 1;
  // HDF5 deflate level of raw snapshots. 0 (default): stored uncompressed
  // and contiguous, written at disk speed; deflate runs at ~10-20 MB/s on
  // float data for ~10% smaller files. 1: runs of equal bytes only (zeros,
  // masks) for snapshots under 1 MiB, at several hundred MB/s.
  int raw_compression_level = 0;
};

// The CPU backend threads of a session's step that reduces `tensors` host
// tensors holding `elements` values in all: cpu_threads when set. Otherwise
// DefaultCpuThreads() (engine.h), minus one when the tensors average fewer
// than kSmallTensorElements values and there is more than one core. Then
// the writer thread's work per record (~0.5-1 us) is comparable to the
// reduction's, and the core left over is the writer's: on 2 cores, 1,000
// tensors of 1,000 f32 took 0.68-0.87 ms per EndStep with one reducing
// thread and 0.96-1.17 ms with two, which took turns on the cores with the
// writer (and OpenMP's spinning worker). Larger tensors keep every core:
// 100 x 100,000 f32 took 2.4 ms per EndStep with two threads, 3.8 ms with
// one (README, "tstat bench capture").
inline constexpr std::int64_t kSmallTensorElements = 8192;
TSTAT_EXPORT int SessionCpuThreads(const PipelineConfig& pipeline, std::int64_t tensors,
                                   std::int64_t elements);

// In-process rules: a rules thread in the session runs the rules config
// (docs/rules.md "The rules config": the schema of `tstat rules --config`) over this
// worker's own steps as they are captured, with the actions of each rule:
// record (RUN/findings.jsonl), print (stderr, one line per episode), stop
// training (ShouldStop), and capture_raw_steps (CaptureRawFor). A finding at
// step s is visible to ShouldStop() before step s+2 begins. The session also
// captures what the rules need of the tensors they judge (per-unit stats,
// label counts, deltas, every step: CaptureNeeds in tstat/rule.h), in
// collections named "rules.*", and says so in its rules summary. JSON: a
// "rules" section present means enabled unless "enabled": false. The
// environment variable TSTAT_RULES_CONFIG=<path> enables them with that file
// (replacing config_file and config of the code's or file's config; plugins
// are kept).
struct InProcessRulesConfig {
  bool enabled = false;
  std::string config_file;           // a rules config file (JSON), or
  std::string config_json;           // the rules config itself (JSON "config": {...});
                                     // neither: the default rule set
  std::vector<std::string> plugins;  // shared libraries of custom rules (tstat/rule_plugin.h)
  // When training stops on its own: on episodes of this severity or above
  // ("critical": the run is wasted; "error"; "warning"; "info"), or "never".
  // A rule's actions.stop_training overrides it for that rule.
  std::string stop_on = "critical";
  // Rules of the set (the default set, or the config's) that do not run.
  std::vector<std::string> disable;
  // Capture what the rules need (false: only what the collections save).
  bool capture_needs = true;
  // What the rules need is captured every this many mode steps.
  std::int64_t save_interval = 1;
};

struct SessionConfig {
  std::string out_dir;  // the run directory; required unless dry_run
  int rank = 0;
  int world_size = 1;
  bool dry_run = false;                          // compute everything, write nothing
  std::vector<std::string> include_collections;  // empty: built-ins except `all`
  SaveConfig save_config;
  SaveConfig raw_save_config;
  StatsConfig stats;
  std::vector<CollectionConfig> collections;
  PipelineConfig pipeline;
  InProcessRulesConfig rules;
};

// Parses the JSON form of tstat.config.SessionConfig and validates it.
// kInvalidArgument naming the field ("collections[0].save_config.save_intervall:
// unknown field (did you mean \"save_interval\"?)") on any error.
TSTAT_EXPORT Result<SessionConfig> ParseConfigJson(std::string_view json);

// Reads and parses a config file. An empty `path` means $TSTAT_CONFIG;
// kNotFound when neither is given, kIoError when the file cannot be read.
TSTAT_EXPORT Result<SessionConfig> LoadConfigFile(const std::string& path = "");

// The config as JSON (snake_case names, every pipeline field written), as it
// is stored in the run. ParseConfigJson(ConfigToJson(c)) gives back c.
TSTAT_EXPORT std::string ConfigToJson(const SessionConfig& config);

// Checks a config built in code: ranges, collection names, regexes, that the
// collections named in include_collections exist. Messages name the field.
TSTAT_EXPORT Status ValidateConfig(const SessionConfig& config);

}  // namespace tstat
