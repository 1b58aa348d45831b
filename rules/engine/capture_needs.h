// How an in-process session names what the rules asked it to capture
// (tstat::CaptureNeeds, tstat/rule.h): one collection per distinct need,
// "rules.<what>.<modes>", e.g. "rules.stats.all" (the stat set in every
// mode), "rules.units.train" (per-unit statistics at TRAIN and GLOBAL
// steps), "rules.units.band_-9.4999_9.4999.train" (per-unit statistics with
// exact counts outside (-9.4999, 9.4999)), "rules.labels.train",
// "rules.delta.train", "rules.stats.train.until_10". A tensor the rules need
// is put in these collections, so the run records what was captured for
// them, and a rule can tell from a tensor's collections which of its needs
// were met (saturated_activation's exact band counts).
// Thread safety: pure functions.
#pragma once

#include <string>

#include "tstat/rule.h"

namespace tstat::rules {

inline constexpr char kRulesCollectionPrefix[] = "rules.";

// The collection name of one need (see above).
std::string NeedsCollectionName(const CaptureNeeds& needs);
// "band_<lo>_<hi>": the part of a collection name that says its band counts
// use exactly (lo, hi).
std::string BandTag(double lo, double hi);
// Whether `t` is in a rules collection whose name carries BandTag(lo, hi).
bool HasBandCounts(const TensorInfo& t, double lo, double hi);

}  // namespace tstat::rules
