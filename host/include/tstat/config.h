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
  // Delta against the tensor's previous save (host tensors: the session keeps
  // a copy of the saved values; CUDA tensors: not supported yet, ignored).
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
  double flush_interval_seconds = 1.0;              // flush at least this often
  std::int64_t flush_interval_steps = 0;            // and every N steps (0 = off)
  bool drop_stats_when_full = false;                // false: the step waits
  std::int64_t stop_check_interval_ms = 500;        // RUN/STOP check period
  int cpu_threads = 0;                              // 0: OpenMP's default
  int cuda_device = 0;
  int cuda_inflight = 2;      // steps reducing on the GPU at once
  int compression_level = 4;  // HDF5 deflate level
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
