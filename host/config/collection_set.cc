// Resolution of collections from the config, and tensor selection.
#include "host/config/collection_set.h"

#include <algorithm>

#include "host/config/builtin_collections.h"
#include "proto/quoted_text.h"

namespace tstat::host {
namespace {

const CollectionConfig* FindConfig(const SessionConfig& config, const std::string& name) {
  for (const CollectionConfig& c : config.collections) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// The user's settings over the built-in ones, field by field.
SaveSchedule Over(const SaveSchedule& user, const SaveSchedule& builtin) {
  SaveSchedule s = builtin;
  if (user.save_interval) s.save_interval = user.save_interval;
  if (!user.save_steps.empty()) s.save_steps = user.save_steps;
  if (user.start_step) s.start_step = user.start_step;
  if (user.end_step) s.end_step = user.end_step;
  return s;
}

SaveConfig Over(const SaveConfig& user, const SaveConfig& builtin) {
  SaveConfig c;
  c.base = Over(user.base, builtin.base);
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}) {
    c.ForMode(m) = Over(user.ForMode(m), builtin.ForMode(m));
  }
  return c;
}

template <class T>
T First(std::initializer_list<const std::optional<T>*> levels, T fallback) {
  for (const std::optional<T>* v : levels) {
    if (v->has_value()) return **v;
  }
  return fallback;
}

CaptureOptions ResolveOptions(const StatsConfig& c, const StatsConfig& s) {
  CaptureOptions out;
  StatsOptions& o = out.stats;
  o.exponent_histogram = First({&c.exponent_histogram, &s.exponent_histogram}, true);
  o.linear_histogram.bins = First({&c.histogram_bins, &s.histogram_bins}, 0);
  const StatsConfig* range = c.histogram_lo ? &c : s.histogram_lo ? &s : nullptr;
  if (range != nullptr) {
    o.linear_histogram.fixed_range = true;
    o.linear_histogram.lo = *range->histogram_lo;
    o.linear_histogram.hi = *range->histogram_hi;
  }
  o.per_channel_axis = First({&c.per_channel_axis, &s.per_channel_axis}, -1);
  o.label_classes = First({&c.label_classes, &s.label_classes}, 0);
  o.sample_count = First<std::int64_t>({&c.sample_count, &s.sample_count}, 0);
  o.band_lo = First({&c.band_lo, &s.band_lo}, o.band_lo);
  o.band_hi = First({&c.band_hi, &s.band_hi}, o.band_hi);
  out.band_set = c.band_lo || c.band_hi || s.band_lo || s.band_hi;
  o.small_eps = First({&c.small_eps, &s.small_eps}, o.small_eps);
  o.delta.atol = First({&c.delta_atol, &s.delta_atol}, o.delta.atol);
  o.delta.rtol = First({&c.delta_rtol, &s.delta_rtol}, o.delta.rtol);
  o.confusion.argmax = First({&c.confusion_argmax, &s.confusion_argmax}, false);
  o.count_values = !c.count_values.empty() ? c.count_values : s.count_values;
  out.delta = First({&c.delta, &s.delta}, false);
  out.confusion_predictions =
      First<std::string>({&c.confusion_predictions, &s.confusion_predictions}, "");
  return out;
}

Result<std::unique_ptr<Collection>> Resolve(const SessionConfig& config, const std::string& name,
                                            const std::unordered_set<std::string>& included) {
  const CollectionConfig builtin = BuiltinCollection(name);
  const CollectionConfig* user = FindConfig(config, name);
  auto c = std::make_unique<Collection>();
  c->name = name;
  c->active = included.count(name) > 0 || user != nullptr;
  c->is_default = name == "default";
  c->is_scalars = name == "scalars";
  const bool user_regex = user && (!user->include_regex.empty() || !user->exclude_regex.empty());
  const CollectionConfig& regex_source = user_regex ? *user : builtin;
  RE2::Options re_options;
  re_options.set_log_errors(false);
  for (const std::string& r : regex_source.include_regex) {
    c->include.push_back(std::make_unique<RE2>(r, re_options));
  }
  for (const std::string& r : regex_source.exclude_regex) {
    c->exclude.push_back(std::make_unique<RE2>(r, re_options));
  }
  for (const auto& re : c->include) {
    if (!re->ok()) return Status::InvalidArgument("collection " + name + ": " + re->error());
  }
  for (const auto& re : c->exclude) {
    if (!re->ok()) return Status::InvalidArgument("collection " + name + ": " + re->error());
  }
  if (user) c->tensor_names.insert(user->tensor_names.begin(), user->tensor_names.end());

  const CollectionConfig empty;
  const CollectionConfig& u = user ? *user : empty;
  const SaveConfig stats_cfg = Over(u.save_config, builtin.save_config);
  const SaveConfig raw_cfg = Over(u.raw_save_config, builtin.raw_save_config);
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}) {
    const int i = static_cast<int>(m) - 1;
    c->stats[i] = ResolveSchedule({&stats_cfg.ForMode(m), &stats_cfg.base,
                                   &config.save_config.ForMode(m), &config.save_config.base},
                                  kDefaultStatsInterval);
    c->raw[i] = ResolveSchedule({&raw_cfg.ForMode(m), &raw_cfg.base,
                                 &config.raw_save_config.ForMode(m), &config.raw_save_config.base},
                                kDefaultRawInterval);
  }
  c->options = ResolveOptions(u.stats, config.stats);
  return c;
}

}  // namespace

bool Collection::Matches(const std::string& tensor_name) const {
  if (tensor_names.count(tensor_name)) return true;
  bool included = false;
  for (const auto& re : include) {
    if (RE2::PartialMatch(tensor_name, *re)) {
      included = true;
      break;
    }
  }
  if (!included) return false;
  for (const auto& re : exclude) {
    if (RE2::PartialMatch(tensor_name, *re)) return false;
  }
  return true;
}

Result<std::unique_ptr<CollectionSet>> CollectionSet::Create(const SessionConfig& config) {
  std::unordered_set<std::string> included(config.include_collections.begin(),
                                           config.include_collections.end());
  if (included.empty()) {
    for (const char* b : kBuiltinCollections) {
      if (std::string(b) != "all") included.insert(b);
    }
  }
  std::vector<std::string> names;
  for (const CollectionConfig& c : config.collections) {
    if (!IsBuiltinCollection(c.name)) names.push_back(c.name);
  }
  for (const std::string& n : config.include_collections) {
    if (!IsBuiltinCollection(n) && std::find(names.begin(), names.end(), n) == names.end()) {
      return Status::InvalidArgument("include_collections: unknown collection \"" +
                                     json::Abbreviated(n) + "\"");
    }
  }
  for (const char* b : kBuiltinCollections) names.push_back(b);
  auto set = std::unique_ptr<CollectionSet>(new CollectionSet());
  for (const std::string& n : names) {
    TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Collection> c, Resolve(config, n, included));
    set->collections_.push_back(std::move(c));
  }
  return set;
}

int CollectionSet::Find(const std::string& name) const {
  for (std::size_t i = 0; i < collections_.size(); ++i) {
    if (collections_[i]->name == name) return static_cast<int>(i);
  }
  return -1;
}

Result<std::vector<int>> CollectionSet::Select(
    const std::string& name, TensorKind kind,
    const std::vector<std::string>& explicit_names) const {
  std::vector<bool> member(collections_.size(), false);
  for (const std::string& e : explicit_names) {
    const int i = Find(e);
    if (i < 0) {
      std::string known;
      for (const auto& c : collections_) known += (known.empty() ? "" : ", ") + c->name;
      return Status::InvalidArgument("unknown collection \"" + e.substr(0, 128) +
                                     "\" (known: " + known + ")");
    }
    member[i] = true;
  }
  bool selected = false;  // by a collection other than `all`, `default`
  for (std::size_t i = 0; i < collections_.size(); ++i) {
    const Collection& c = *collections_[i];
    if (c.is_default) continue;
    if (c.is_scalars) {
      member[i] = member[i] || kind == TensorKind::kScalar;
    } else if (!member[i]) {
      member[i] = c.Matches(name);
    }
    if (member[i] && c.name != "all") selected = true;
  }
  const int def = Find("default");
  if (kind == TensorKind::kTensor && !selected && def >= 0) member[def] = true;
  std::vector<int> out;
  for (std::size_t i = 0; i < member.size(); ++i) {
    if (member[i]) out.push_back(static_cast<int>(i));
  }
  return out;
}

int CollectionSet::AddRulesCollection(const std::string& name, const CaptureNeeds& needs,
                                      std::int64_t interval, const StatsConfig& session_stats) {
  const int existing = Find(name);
  if (existing >= 0) return existing;
  auto c = std::make_unique<Collection>();
  c->name = name;
  c->active = true;
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}) {
    ResolvedSchedule& r = c->stats[static_cast<int>(m) - 1];
    r.save_interval = (needs.modes & CaptureNeeds::ModeBit(m)) ? interval : 0;
    if (needs.until_step > 0) r.end_step = needs.until_step;
    c->raw[static_cast<int>(m) - 1].save_interval = 0;
  }
  c->options = ResolveOptions(StatsConfig(), session_stats);
  if (needs.per_unit && c->options.stats.per_channel_axis < 0) {
    c->options.stats.per_channel_axis = 1;
    c->options.per_unit_from_rules = true;
  }
  if (needs.band) {
    c->options.stats.band_lo = needs.band_lo;
    c->options.stats.band_hi = needs.band_hi;
    c->options.band_set = true;
  }
  c->options.infer_label_classes = needs.label_counts;
  c->options.delta = c->options.delta || needs.delta;
  collections_.push_back(std::move(c));
  return static_cast<int>(collections_.size()) - 1;
}

CaptureOptions MergeOptions(const CollectionSet& set, const std::vector<int>& due) {
  CaptureOptions out;
  if (due.empty()) return out;
  out = set.at(due[0]).options;  // eps: the first due collection's
  StatsOptions& o = out.stats;
  for (std::size_t k = 1; k < due.size(); ++k) {
    const CaptureOptions& xo = set.at(due[k]).options;
    const StatsOptions& x = xo.stats;
    if (!out.band_set && xo.band_set) {
      o.band_lo = x.band_lo;
      o.band_hi = x.band_hi;
      out.band_set = true;
    }
    out.infer_label_classes = out.infer_label_classes || xo.infer_label_classes;
    o.exponent_histogram = o.exponent_histogram || x.exponent_histogram;
    if (o.linear_histogram.bins == 0) o.linear_histogram = x.linear_histogram;
    if (o.per_channel_axis < 0 && x.per_channel_axis >= 0) {
      o.per_channel_axis = x.per_channel_axis;
      out.per_unit_from_rules = xo.per_unit_from_rules;
    }
    if (o.label_classes == 0) o.label_classes = x.label_classes;
    o.sample_count = std::max(o.sample_count, x.sample_count);
    if (o.count_values.empty()) o.count_values = x.count_values;
    if (!out.delta && xo.delta) {
      out.delta = true;
      o.delta = x.delta;
    }
    if (out.confusion_predictions.empty() && !xo.confusion_predictions.empty()) {
      out.confusion_predictions = xo.confusion_predictions;
      o.confusion = x.confusion;
    }
  }
  return out;
}

}  // namespace tstat::host
