// CollectionSet: the session's collections, resolved: compiled regexes, the
// stats and raw schedules of every mode, and the StatsOptions; plus which
// collections select a tensor.
//
// Order: custom collections in config order, then the built-ins in
// kBuiltinCollections order. When several collections select a tensor, it is
// saved at the union of their steps, with the union of their stats; where
// they disagree (histogram range, channel axis, band limits) the first due
// collection in this order wins.
//
// A collection is active (its tensors are captured) when include_collections
// names it (or, when that is empty, it is a built-in other than `all`), or when
// it is configured in `collections` (as smdebug includes configured ones).
// Thread safety: immutable after Create; RE2 matching is thread-safe.
#pragma once

#include <re2/re2.h>

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "host/config/save_schedule.h"
#include "tstat/config.h"
#include "tstat/rule.h"
#include "tstat/stats.h"
#include "tstat/stats_record.h"

namespace tstat::host {

// What a collection asks to compute for its tensors. stats.delta.previous and
// stats.confusion.predictions are pointers the capture fills in per step.
struct CaptureOptions {
  StatsOptions stats;
  bool delta = false;                 // delta against the previous save
  std::string confusion_predictions;  // name of the predictions tensor; empty = off
  bool band_set = false;              // band_lo/band_hi were configured (not the defaults)
  // per_channel_axis is the rules' per-unit need, not configured: each
  // tensor gets its units' axis at each step (TensorSpec::unit_axis, else
  // by rank), none below rank 2.
  bool per_unit_from_rules = false;
  // Label counts with the classes the session infers for the tensor
  // (RegisteredTensor::label_classes), unless label_classes is set.
  bool infer_label_classes = false;
};

struct Collection {
  std::string name;
  bool active = false;
  bool is_default = false;  // `default`: tensors no other collection selects
  bool is_scalars = false;  // `scalars`: every scalar
  std::vector<std::unique_ptr<RE2>> include, exclude;
  std::unordered_set<std::string> tensor_names;
  ResolvedSchedule stats[4];  // by Mode - 1
  ResolvedSchedule raw[4];
  CaptureOptions options;

  const ResolvedSchedule& stats_schedule(Mode m) const { return stats[static_cast<int>(m) - 1]; }
  const ResolvedSchedule& raw_schedule(Mode m) const { return raw[static_cast<int>(m) - 1]; }
  bool Matches(const std::string& tensor_name) const;
};

class CollectionSet {
 public:
  // `config` must have passed ValidateConfig.
  static Result<std::unique_ptr<CollectionSet>> Create(const SessionConfig& config);

  // The collection `name` for what the rules need (`needs`, named by
  // rules::NeedsCollectionName), added after every other collection on first
  // use: saved every `interval` steps of needs.modes (below
  // needs.until_step), with the session's stats config plus the need.
  // Returns its index. Not thread-safe: the session adds them under its lock.
  int AddRulesCollection(const std::string& name, const CaptureNeeds& needs, std::int64_t interval,
                         const StatsConfig& session_stats);

  int size() const { return static_cast<int>(collections_.size()); }
  const Collection& at(int i) const { return *collections_[i]; }
  // Index of collection `name`, or -1.
  int Find(const std::string& name) const;

  // The collections (indices, ascending) that select a tensor or scalar
  // called `name`, including `explicit_names`. kInvalidArgument naming an
  // unknown explicit collection.
  Result<std::vector<int>> Select(const std::string& name, TensorKind kind,
                                  const std::vector<std::string>& explicit_names) const;

 private:
  std::vector<std::unique_ptr<Collection>> collections_;
};

// The options of a tensor saved at a step: the union over its due collections
// (`due`, in collection order) as described above; the band limits of the
// first due collection that configures them (else the defaults).
CaptureOptions MergeOptions(const CollectionSet& set, const std::vector<int>& due);

}  // namespace tstat::host
