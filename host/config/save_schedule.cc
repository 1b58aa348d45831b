// Schedule resolution and the save rule.
#include "host/config/save_schedule.h"

#include <algorithm>

namespace tstat::host {

bool ResolvedSchedule::ShouldSave(std::int64_t mode_step) const {
  if (std::binary_search(save_steps.begin(), save_steps.end(), mode_step)) return true;
  if (save_interval <= 0 || mode_step < start_step) return false;
  if (end_step && mode_step >= *end_step) return false;
  return mode_step % save_interval == 0;
}

ResolvedSchedule ResolveSchedule(const std::vector<const SaveSchedule*>& levels,
                                 std::int64_t default_interval) {
  ResolvedSchedule r;
  r.save_interval = default_interval;
  bool interval = false, steps = false, start = false, end = false;
  for (const SaveSchedule* s : levels) {
    if (s == nullptr) continue;
    if (!interval && s->save_interval) {
      r.save_interval = *s->save_interval;
      interval = true;
    }
    if (!steps && !s->save_steps.empty()) {
      r.save_steps = s->save_steps;
      steps = true;
    }
    if (!start && s->start_step) {
      r.start_step = *s->start_step;
      start = true;
    }
    if (!end && s->end_step) {
      r.end_step = *s->end_step;
      end = true;
    }
  }
  std::sort(r.save_steps.begin(), r.save_steps.end());
  r.save_steps.erase(std::unique(r.save_steps.begin(), r.save_steps.end()), r.save_steps.end());
  return r;
}

}  // namespace tstat::host
