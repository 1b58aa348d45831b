// ResolvedSchedule: one collection's schedule for one mode, after
// inheritance, and the smdebug save rule.
//
// Resolution (config.h): each field comes from the most specific level that
// sets it, levels ordered collection.<mode>, collection (base),
// session.<mode>, session (base); then the default. Thread safety: values.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tstat/config.h"

namespace tstat::host {

struct ResolvedSchedule {
  std::int64_t save_interval = 0;        // 0: only save_steps
  std::vector<std::int64_t> save_steps;  // sorted, unique
  std::int64_t start_step = 0;
  std::optional<std::int64_t> end_step;  // exclusive; none = forever

  // smdebug's should_save_step, on the MODE step: listed in save_steps, or
  // start_step <= step < end_step and step % save_interval == 0.
  bool ShouldSave(std::int64_t mode_step) const;
};

// `levels` from most to least specific; nullptr entries are skipped.
ResolvedSchedule ResolveSchedule(const std::vector<const SaveSchedule*>& levels,
                                 std::int64_t default_interval);

// Default save_interval of stats when no level sets one (smdebug: 500; tstat
// stats are cheap, so denser).
inline constexpr std::int64_t kDefaultStatsInterval = 100;
// Raw snapshots are never saved unless some level asks.
inline constexpr std::int64_t kDefaultRawInterval = 0;

}  // namespace tstat::host
