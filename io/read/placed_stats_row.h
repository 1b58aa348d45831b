// PlacedStatsRow: a stats row as a step's records are kept in memory
// (SegmentSteps): without the step keys its place already says, 144 bytes
// instead of StatsRow's 168, so that a segment put into capture order
// moves fewer cache lines.
// Thread safety: plain data.
#pragma once

#include <cstdint>

#include "io/format/segment_schema.h"

namespace tstat::io {

struct PlacedStatsRow {
  std::uint32_t tensor_id;
  std::uint8_t has_stats;  // 0: the record holds only label counts
  StoredStats s;
};

inline PlacedStatsRow Placed(const StatsRow& r) {
  return PlacedStatsRow{r.tensor_id, r.has_stats, r.s};
}

}  // namespace tstat::io
