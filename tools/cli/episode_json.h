// An episode (tstat/rule.h) as one JSON object, the same in `tstat inspect
// --json` (the findings log of a run) and `tstat check --json` (a fresh
// judgement), so the two can be compared field by field:
//   {"id", "rule", "type", "worker", "tensor", "severity", "mode",
//    "first_step", "first_global_step", "last_step", "last_global_step",
//    "reported_step", "reported_global_step", "steps", "open",
//    "worst_measure", "worst_value", "worst_step", "worst_global_step",
//    "message"}  (steps are mode steps unless named global)
// Thread safety: a pure function.
#pragma once

#include <string>

#include "tstat/rule.h"

namespace tstat::cli {

std::string EpisodeJson(const Episode& e);

}  // namespace tstat::cli
