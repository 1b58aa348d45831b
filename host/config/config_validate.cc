// ValidateConfig (tstat/config.h): every range and name check of a config,
// with messages that name the field by its JSON path.
#include <re2/re2.h>

#include <cmath>
#include <set>
#include <string>

#include "host/config/builtin_collections.h"
#include "io/format/run_layout.h"
#include "proto/quoted_text.h"
#include "rules/engine/rules_config.h"
#include "rules/runtime/actions.h"
#include "tstat/config.h"

namespace tstat {
namespace {

std::string Idx(const std::string& field, std::size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

Status CheckSchedule(const SaveSchedule& s, const std::string& path) {
  const std::string p = path.empty() ? "" : path + ".";
  if (s.save_interval && *s.save_interval < 0) {
    return Status::InvalidArgument(p + "save_interval: must be >= 0 (0: only save_steps), got " +
                                   std::to_string(*s.save_interval));
  }
  if (s.start_step && *s.start_step < 0) {
    return Status::InvalidArgument(p + "start_step: must be >= 0, got " +
                                   std::to_string(*s.start_step));
  }
  if (s.end_step && *s.end_step < 0) {
    return Status::InvalidArgument(p + "end_step: must be >= 0, got " +
                                   std::to_string(*s.end_step));
  }
  if (s.start_step && s.end_step && *s.end_step < *s.start_step) {
    return Status::InvalidArgument(p + "end_step: " + std::to_string(*s.end_step) +
                                   " is before start_step " + std::to_string(*s.start_step));
  }
  for (std::size_t i = 0; i < s.save_steps.size(); ++i) {
    if (s.save_steps[i] < 0) {
      return Status::InvalidArgument(Idx(p + "save_steps", i) + ": must be >= 0, got " +
                                     std::to_string(s.save_steps[i]));
    }
  }
  return Status::OK();
}

Status CheckSaveConfig(const SaveConfig& c, const std::string& path) {
  TSTAT_RETURN_IF_ERROR(CheckSchedule(c.base, path));
  TSTAT_RETURN_IF_ERROR(CheckSchedule(c.train, path + ".train"));
  TSTAT_RETURN_IF_ERROR(CheckSchedule(c.eval, path + ".eval"));
  TSTAT_RETURN_IF_ERROR(CheckSchedule(c.predict, path + ".predict"));
  return CheckSchedule(c.global, path + ".global");
}

Status CheckStats(const StatsConfig& s, const std::string& path) {
  const std::string p = path + ".";
  if (s.histogram_bins && (*s.histogram_bins < 0 || *s.histogram_bins > kMaxLinearBins)) {
    return Status::InvalidArgument(p + "histogram_bins: must be in [0, " +
                                   std::to_string(kMaxLinearBins) + "], got " +
                                   std::to_string(*s.histogram_bins));
  }
  if (s.histogram_lo.has_value() != s.histogram_hi.has_value()) {
    return Status::InvalidArgument(p + (s.histogram_lo ? "histogram_hi" : "histogram_lo") +
                                   ": histogram_lo and histogram_hi must be set together");
  }
  if (s.histogram_lo && !(std::isfinite(*s.histogram_lo) && std::isfinite(*s.histogram_hi) &&
                          *s.histogram_lo < *s.histogram_hi)) {
    return Status::InvalidArgument(p + "histogram_lo: need finite histogram_lo < histogram_hi");
  }
  if (s.per_channel_axis && (*s.per_channel_axis < -1 || *s.per_channel_axis > 63)) {
    return Status::InvalidArgument(p + "per_channel_axis: must be -1 (off) or an axis, got " +
                                   std::to_string(*s.per_channel_axis));
  }
  if (s.label_classes && (*s.label_classes < 0 || *s.label_classes > (1 << 24))) {
    return Status::InvalidArgument(p + "label_classes: must be in [0, 16777216], got " +
                                   std::to_string(*s.label_classes));
  }
  if (s.sample_count && (*s.sample_count < 0 || *s.sample_count > (1 << 24))) {
    return Status::InvalidArgument(p + "sample_count: must be in [0, 16777216], got " +
                                   std::to_string(*s.sample_count));
  }
  if (s.small_eps && !(*s.small_eps >= 0.0)) {
    return Status::InvalidArgument(p + "small_eps: must be >= 0");
  }
  if (s.delta_atol && !(*s.delta_atol >= 0.0)) {
    return Status::InvalidArgument(p + "delta_atol: must be >= 0");
  }
  if (s.delta_rtol && !(*s.delta_rtol >= 0.0)) {
    return Status::InvalidArgument(p + "delta_rtol: must be >= 0");
  }
  if (s.count_values.size() > static_cast<std::size_t>(kMaxCountValues)) {
    return Status::InvalidArgument(p + "count_values: at most " + std::to_string(kMaxCountValues) +
                                   " values, got " + std::to_string(s.count_values.size()));
  }
  if (s.confusion_predictions && s.confusion_predictions->empty()) {
    return Status::InvalidArgument(p + "confusion_predictions: empty tensor name");
  }
  if (s.band_lo && std::isnan(*s.band_lo)) return Status::InvalidArgument(p + "band_lo: NaN");
  if (s.band_hi && std::isnan(*s.band_hi)) return Status::InvalidArgument(p + "band_hi: NaN");
  if (s.band_lo && s.band_hi && *s.band_lo > *s.band_hi) {
    return Status::InvalidArgument(p + "band_lo: " + std::to_string(*s.band_lo) +
                                   " is above band_hi " + std::to_string(*s.band_hi));
  }
  return Status::OK();
}

Status CheckRegexes(const std::vector<std::string>& regexes, const std::string& path) {
  for (std::size_t i = 0; i < regexes.size(); ++i) {
    RE2::Options options;
    options.set_log_errors(false);
    RE2 re(regexes[i], options);
    if (!re.ok()) {
      return Status::InvalidArgument(Idx(path, i) + ": invalid regex \"" +
                                     json::Abbreviated(regexes[i]) +
                                     "\": " + json::Abbreviated(re.error()));
    }
  }
  return Status::OK();
}

Status CheckPipeline(const PipelineConfig& p) {
  auto bad = [](const char* field, const std::string& what) {
    return Status::InvalidArgument(std::string("pipeline.") + field + ": " + what);
  };
  if (p.queue_capacity < 1 || p.queue_capacity > (1 << 20)) {
    return bad("queue_capacity",
               "must be in [1, 1048576], got " + std::to_string(p.queue_capacity));
  }
  if (p.raw_memory_cap_bytes < 0) return bad("raw_memory_cap_bytes", "must be >= 0");
  if (p.delta_memory_cap_bytes < 0) return bad("delta_memory_cap_bytes", "must be >= 0");
  // Upper bounds: a day of unflushed data or of an unnoticed stop is a
  // mistake, not a setting; more threads than any machine has, too.
  if (!(p.flush_interval_seconds > 0.0) || !(p.flush_interval_seconds <= 86400.0)) {
    return bad("flush_interval_seconds",
               "must be in (0, 86400] seconds, got " + std::to_string(p.flush_interval_seconds));
  }
  if (p.flush_interval_steps < 0 || p.flush_interval_steps > 1000000000) {
    return bad("flush_interval_steps",
               "must be in [0, 1e9] (0: off), got " + std::to_string(p.flush_interval_steps));
  }
  if (p.stop_check_interval_ms < 0 || p.stop_check_interval_ms > 86400000) {
    return bad("stop_check_interval_ms",
               "must be in [0, 86400000], got " + std::to_string(p.stop_check_interval_ms));
  }
  if (p.cpu_threads < 0 || p.cpu_threads > 4096) {
    return bad("cpu_threads",
               "must be in [0, 4096] (0: OpenMP's default), got " + std::to_string(p.cpu_threads));
  }
  if (p.cuda_device < 0) return bad("cuda_device", "must be >= 0");
  if (p.cuda_inflight < 1 || p.cuda_inflight > 16) {
    return bad("cuda_inflight", "must be in [1, 16], got " + std::to_string(p.cuda_inflight));
  }
  if (p.compression_level < 0 || p.compression_level > 9) {
    return bad("compression_level",
               "must be in [0, 9], got " + std::to_string(p.compression_level));
  }
  if (p.raw_compression_level < 0 || p.raw_compression_level > 9) {
    return bad("raw_compression_level",
               "must be in [0, 9], got " + std::to_string(p.raw_compression_level));
  }
  return Status::OK();
}

// The structure of the in-process rules config; rule types and parameters
// are checked when the session creates the rules (plugins may add types).
Status CheckRules(const InProcessRulesConfig& r) {
  if (!r.config_file.empty() && !r.config_json.empty()) {
    return Status::InvalidArgument(
        "rules.config: give either config or config_file, not both (config_file is \"" +
        r.config_file + "\")");
  }
  if (!r.config_json.empty()) {
    Result<rules::RulesConfig> parsed = rules::ParseRulesConfigJson(r.config_json);
    if (!parsed.ok()) return parsed.status().WithContext("rules.config");
  }
  for (std::size_t i = 0; i < r.plugins.size(); ++i) {
    if (r.plugins[i].empty()) {
      return Status::InvalidArgument(Idx("rules.plugins", i) + ": empty path");
    }
  }
  rules::StopPolicy stop;
  if (!rules::StopPolicy::Parse(r.stop_on, &stop)) {
    return Status::InvalidArgument("rules.stop_on: \"" + r.stop_on.substr(0, 64) +
                                   "\" is not one of critical, error, warning, info, never");
  }
  for (std::size_t i = 0; i < r.disable.size(); ++i) {
    if (r.disable[i].empty())
      return Status::InvalidArgument(Idx("rules.disable", i) + ": empty name");
  }
  if (r.save_interval < 1 || r.save_interval > 1000000) {
    return Status::InvalidArgument("rules.save_interval: must be in [1, 1000000], got " +
                                   std::to_string(r.save_interval));
  }
  return Status::OK();
}

}  // namespace

Status ValidateConfig(const SessionConfig& c) {
  if (c.world_size < 1 || c.world_size > io::kMaxWorldSize) {
    return Status::InvalidArgument("world_size: must be in [1, " +
                                   std::to_string(io::kMaxWorldSize) + "], got " +
                                   std::to_string(c.world_size));
  }
  if (c.out_dir.find('\0') != std::string::npos) {
    return Status::InvalidArgument("out_dir: contains a NUL character");
  }
  if (c.rank < 0 || c.rank >= c.world_size) {
    return Status::InvalidArgument("rank: must be in [0, world_size) = [0, " +
                                   std::to_string(c.world_size) + "), got " +
                                   std::to_string(c.rank));
  }
  TSTAT_RETURN_IF_ERROR(CheckSaveConfig(c.save_config, "save_config"));
  TSTAT_RETURN_IF_ERROR(CheckSaveConfig(c.raw_save_config, "raw_save_config"));
  TSTAT_RETURN_IF_ERROR(CheckStats(c.stats, "stats"));
  std::set<std::string> names;
  for (const char* b : kBuiltinCollections) names.insert(b);
  std::set<std::string> configured;
  for (std::size_t i = 0; i < c.collections.size(); ++i) {
    const CollectionConfig& cc = c.collections[i];
    const std::string path = Idx("collections", i);
    TSTAT_RETURN_IF_ERROR(host::CheckCollectionName(cc.name).WithContext(path + ".name"));
    if (!configured.insert(cc.name).second) {
      return Status::InvalidArgument(path + ".name: collection \"" + cc.name +
                                     "\" is configured twice");
    }
    names.insert(cc.name);
    TSTAT_RETURN_IF_ERROR(CheckRegexes(cc.include_regex, path + ".include_regex"));
    TSTAT_RETURN_IF_ERROR(CheckRegexes(cc.exclude_regex, path + ".exclude_regex"));
    TSTAT_RETURN_IF_ERROR(CheckSaveConfig(cc.save_config, path + ".save_config"));
    TSTAT_RETURN_IF_ERROR(CheckSaveConfig(cc.raw_save_config, path + ".raw_save_config"));
    TSTAT_RETURN_IF_ERROR(CheckStats(cc.stats, path + ".stats"));
  }
  for (std::size_t i = 0; i < c.include_collections.size(); ++i) {
    if (names.count(c.include_collections[i]) == 0) {
      return Status::InvalidArgument(Idx("include_collections", i) + ": unknown collection \"" +
                                     json::Abbreviated(c.include_collections[i]) +
                                     "\" (neither built in nor configured in collections)");
    }
  }
  TSTAT_RETURN_IF_ERROR(CheckPipeline(c.pipeline));
  return CheckRules(c.rules);
}

}  // namespace tstat
