// SessionConfig <-> tstat.config.SessionConfig, field by field.
#include "host/config/config_proto.h"

#include <google/protobuf/util/json_util.h>

namespace tstat::host {
namespace {

bool IsEmpty(const SaveSchedule& s) {
  return !s.save_interval && s.save_steps.empty() && !s.start_step && !s.end_step;
}

// Both proto messages (SaveSchedule, and SaveConfig's base part) have the
// same four fields; so does the C++ side.
template <class P>
void ScheduleToProto(const SaveSchedule& in, P* out) {
  if (in.save_interval) out->set_save_interval(*in.save_interval);
  for (std::int64_t s : in.save_steps) out->add_save_steps(s);
  if (in.start_step) out->set_start_step(*in.start_step);
  if (in.end_step) out->set_end_step(*in.end_step);
}

template <class P>
SaveSchedule ScheduleFromProto(const P& in) {
  SaveSchedule s;
  if (in.has_save_interval()) s.save_interval = in.save_interval();
  s.save_steps.assign(in.save_steps().begin(), in.save_steps().end());
  if (in.has_start_step()) s.start_step = in.start_step();
  if (in.has_end_step()) s.end_step = in.end_step();
  return s;
}

void SaveConfigToProto(const SaveConfig& in, config::SaveConfig* out) {
  ScheduleToProto(in.base, out);
  if (!IsEmpty(in.train)) ScheduleToProto(in.train, out->mutable_train());
  if (!IsEmpty(in.eval)) ScheduleToProto(in.eval, out->mutable_eval());
  if (!IsEmpty(in.predict)) ScheduleToProto(in.predict, out->mutable_predict());
  if (!IsEmpty(in.global)) ScheduleToProto(in.global, out->mutable_global());
}

SaveConfig SaveConfigFromProto(const config::SaveConfig& in) {
  SaveConfig c;
  c.base = ScheduleFromProto(in);
  c.train = ScheduleFromProto(in.train());
  c.eval = ScheduleFromProto(in.eval());
  c.predict = ScheduleFromProto(in.predict());
  c.global = ScheduleFromProto(in.global());
  return c;
}

bool IsEmpty(const SaveConfig& c) {
  return IsEmpty(c.base) && IsEmpty(c.train) && IsEmpty(c.eval) && IsEmpty(c.predict) &&
         IsEmpty(c.global);
}

void StatsToProto(const StatsConfig& in, config::StatsConfig* out) {
  if (in.exponent_histogram) out->set_exponent_histogram(*in.exponent_histogram);
  if (in.histogram_bins) out->set_histogram_bins(*in.histogram_bins);
  if (in.histogram_lo) out->set_histogram_lo(*in.histogram_lo);
  if (in.histogram_hi) out->set_histogram_hi(*in.histogram_hi);
  if (in.per_channel_axis) out->set_per_channel_axis(*in.per_channel_axis);
  if (in.label_classes) out->set_label_classes(*in.label_classes);
  if (in.sample_count) out->set_sample_count(*in.sample_count);
  if (in.band_lo) out->set_band_lo(*in.band_lo);
  if (in.band_hi) out->set_band_hi(*in.band_hi);
  if (in.small_eps) out->set_small_eps(*in.small_eps);
  if (in.delta) out->set_delta(*in.delta);
  if (in.delta_atol) out->set_delta_atol(*in.delta_atol);
  if (in.delta_rtol) out->set_delta_rtol(*in.delta_rtol);
  if (in.confusion_predictions) out->set_confusion_predictions(*in.confusion_predictions);
  if (in.confusion_argmax) out->set_confusion_argmax(*in.confusion_argmax);
  for (std::int64_t v : in.count_values) out->add_count_values(v);
}

StatsConfig StatsFromProto(const config::StatsConfig& in) {
  StatsConfig s;
  if (in.has_exponent_histogram()) s.exponent_histogram = in.exponent_histogram();
  if (in.has_histogram_bins()) s.histogram_bins = in.histogram_bins();
  if (in.has_histogram_lo()) s.histogram_lo = in.histogram_lo();
  if (in.has_histogram_hi()) s.histogram_hi = in.histogram_hi();
  if (in.has_per_channel_axis()) s.per_channel_axis = in.per_channel_axis();
  if (in.has_label_classes()) s.label_classes = in.label_classes();
  if (in.has_sample_count()) s.sample_count = in.sample_count();
  if (in.has_band_lo()) s.band_lo = in.band_lo();
  if (in.has_band_hi()) s.band_hi = in.band_hi();
  if (in.has_small_eps()) s.small_eps = in.small_eps();
  if (in.has_delta()) s.delta = in.delta();
  if (in.has_delta_atol()) s.delta_atol = in.delta_atol();
  if (in.has_delta_rtol()) s.delta_rtol = in.delta_rtol();
  if (in.has_confusion_predictions()) s.confusion_predictions = in.confusion_predictions();
  if (in.has_confusion_argmax()) s.confusion_argmax = in.confusion_argmax();
  s.count_values.assign(in.count_values().begin(), in.count_values().end());
  return s;
}

bool IsEmpty(const StatsConfig& s) {
  return !s.exponent_histogram && !s.histogram_bins && !s.histogram_lo && !s.histogram_hi &&
         !s.per_channel_axis && !s.label_classes && !s.sample_count && !s.band_lo && !s.band_hi &&
         !s.small_eps;
}

void PipelineToProto(const PipelineConfig& in, config::PipelineConfig* out) {
  out->set_queue_capacity(in.queue_capacity);
  out->set_raw_memory_cap_bytes(in.raw_memory_cap_bytes);
  out->set_flush_interval_seconds(in.flush_interval_seconds);
  out->set_flush_interval_steps(in.flush_interval_steps);
  out->set_drop_stats_when_full(in.drop_stats_when_full);
  out->set_early_capture_thread(in.early_capture_thread);
  out->set_early_capture_evict(in.early_capture_evict);
  out->set_stop_check_interval_ms(in.stop_check_interval_ms);
  out->set_cpu_threads(in.cpu_threads);
  out->set_cuda_device(in.cuda_device);
  out->set_cuda_inflight(in.cuda_inflight);
  out->set_compression_level(in.compression_level);
  out->set_raw_compression_level(in.raw_compression_level);
  out->set_delta_memory_cap_bytes(in.delta_memory_cap_bytes);
}

PipelineConfig PipelineFromProto(const config::PipelineConfig& in) {
  PipelineConfig p;
  if (in.has_queue_capacity()) p.queue_capacity = in.queue_capacity();
  if (in.has_raw_memory_cap_bytes()) p.raw_memory_cap_bytes = in.raw_memory_cap_bytes();
  if (in.has_flush_interval_seconds()) p.flush_interval_seconds = in.flush_interval_seconds();
  if (in.has_flush_interval_steps()) p.flush_interval_steps = in.flush_interval_steps();
  if (in.has_drop_stats_when_full()) p.drop_stats_when_full = in.drop_stats_when_full();
  if (in.has_early_capture_thread()) p.early_capture_thread = in.early_capture_thread();
  if (in.has_early_capture_evict()) p.early_capture_evict = in.early_capture_evict();
  if (in.has_stop_check_interval_ms()) p.stop_check_interval_ms = in.stop_check_interval_ms();
  if (in.has_cpu_threads()) p.cpu_threads = in.cpu_threads();
  if (in.has_cuda_device()) p.cuda_device = in.cuda_device();
  if (in.has_cuda_inflight()) p.cuda_inflight = in.cuda_inflight();
  if (in.has_compression_level()) p.compression_level = in.compression_level();
  if (in.has_raw_compression_level()) p.raw_compression_level = in.raw_compression_level();
  if (in.has_delta_memory_cap_bytes()) p.delta_memory_cap_bytes = in.delta_memory_cap_bytes();
  return p;
}

void RulesToProto(const InProcessRulesConfig& in, config::RulesSection* out) {
  out->set_enabled(in.enabled);
  out->set_config_file(in.config_file);
  if (!in.config_json.empty()) {
    // Invalid JSON cannot get here through ValidateConfig; should it, the
    // config is left out rather than stored half-parsed.
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    if (!google::protobuf::util::JsonStringToMessage(in.config_json, out->mutable_config(), options)
             .ok()) {
      out->clear_config();
    }
  }
  for (const std::string& p : in.plugins) out->add_plugins(p);
  out->set_stop_on(in.stop_on);
  for (const std::string& d : in.disable) out->add_disable(d);
  out->set_capture_needs(in.capture_needs);
  out->set_save_interval(in.save_interval);
}

InProcessRulesConfig RulesFromProto(const config::RulesSection& in) {
  InProcessRulesConfig r;
  r.enabled = in.has_enabled() ? in.enabled() : true;  // the section present: enabled
  r.config_file = in.config_file();
  if (in.has_config()) {
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(in.config(), &r.config_json, options);
    if (r.config_json.empty()) r.config_json = "{}";
  }
  r.plugins.assign(in.plugins().begin(), in.plugins().end());
  if (!in.stop_on().empty()) r.stop_on = in.stop_on();
  r.disable.assign(in.disable().begin(), in.disable().end());
  if (in.has_capture_needs()) r.capture_needs = in.capture_needs();
  if (in.has_save_interval()) r.save_interval = in.save_interval();
  return r;
}

bool IsEmpty(const InProcessRulesConfig& r) {
  const InProcessRulesConfig defaults;
  return !r.enabled && r.config_file.empty() && r.config_json.empty() && r.plugins.empty() &&
         r.stop_on == defaults.stop_on && r.disable.empty() &&
         r.capture_needs == defaults.capture_needs && r.save_interval == defaults.save_interval;
}

}  // namespace

void ConfigToProto(const SessionConfig& in, config::SessionConfig* out) {
  out->Clear();
  out->set_out_dir(in.out_dir);
  out->set_rank(in.rank);
  out->set_world_size(in.world_size);
  out->set_dry_run(in.dry_run);
  for (const std::string& c : in.include_collections) out->add_include_collections(c);
  if (!IsEmpty(in.save_config)) SaveConfigToProto(in.save_config, out->mutable_save_config());
  if (!IsEmpty(in.raw_save_config)) {
    SaveConfigToProto(in.raw_save_config, out->mutable_raw_save_config());
  }
  if (!IsEmpty(in.stats)) StatsToProto(in.stats, out->mutable_stats());
  for (const CollectionConfig& c : in.collections) {
    config::CollectionConfig* pc = out->add_collections();
    pc->set_name(c.name);
    for (const std::string& r : c.include_regex) pc->add_include_regex(r);
    for (const std::string& r : c.exclude_regex) pc->add_exclude_regex(r);
    for (const std::string& n : c.tensor_names) pc->add_tensor_names(n);
    if (!IsEmpty(c.save_config)) SaveConfigToProto(c.save_config, pc->mutable_save_config());
    if (!IsEmpty(c.raw_save_config)) {
      SaveConfigToProto(c.raw_save_config, pc->mutable_raw_save_config());
    }
    if (!IsEmpty(c.stats)) StatsToProto(c.stats, pc->mutable_stats());
  }
  PipelineToProto(in.pipeline, out->mutable_pipeline());
  if (!IsEmpty(in.rules)) RulesToProto(in.rules, out->mutable_rules());
}

SessionConfig ConfigFromProto(const config::SessionConfig& in) {
  SessionConfig c;
  c.out_dir = in.out_dir();
  if (in.has_rank()) c.rank = in.rank();
  if (in.has_world_size()) c.world_size = in.world_size();
  if (in.has_dry_run()) c.dry_run = in.dry_run();
  c.include_collections.assign(in.include_collections().begin(), in.include_collections().end());
  c.save_config = SaveConfigFromProto(in.save_config());
  c.raw_save_config = SaveConfigFromProto(in.raw_save_config());
  c.stats = StatsFromProto(in.stats());
  for (const config::CollectionConfig& pc : in.collections()) {
    CollectionConfig cc;
    cc.name = pc.name();
    cc.include_regex.assign(pc.include_regex().begin(), pc.include_regex().end());
    cc.exclude_regex.assign(pc.exclude_regex().begin(), pc.exclude_regex().end());
    cc.tensor_names.assign(pc.tensor_names().begin(), pc.tensor_names().end());
    cc.save_config = SaveConfigFromProto(pc.save_config());
    cc.raw_save_config = SaveConfigFromProto(pc.raw_save_config());
    cc.stats = StatsFromProto(pc.stats());
    c.collections.push_back(std::move(cc));
  }
  c.pipeline = PipelineFromProto(in.pipeline());
  if (in.has_rules()) c.rules = RulesFromProto(in.rules());
  return c;
}

}  // namespace tstat::host
