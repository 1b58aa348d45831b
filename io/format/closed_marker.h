// The CLOSED marker of a worker directory: a small JSON file written
// atomically by Close() after the last segment, holding the final counters.
//
//   {"format": "tstat-run", "format_version": 2, "rank": 0, "world_size": 2,
//    "host": "node-1", "segments": 12, "counters": {"steps_captured": 100, ...}}
//
// Counter names are the PipelineCounters member names; PipelineCounters::capture
// is flattened as in the counters table (capture_steps, capture_steps_saved,
// capture_step_seconds, capture_seconds). Readers treat a worker
// with a CLOSED file as finished: no segment will be added after it.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "io/format/segment_schema.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::io {

inline constexpr char kClosedFileName[] = "CLOSED";
// A marker is a few hundred bytes; a larger file is not one (not read).
inline constexpr std::uint64_t kMaxClosedMarkerBytes = 1 << 20;

struct ClosedMarker {
  int rank = 0;
  int world_size = 1;
  std::string host;
  std::int64_t segments = 0;
  PipelineCounters counters;
  // The run format the worker wrote; ParseClosedMarker accepts
  // kOldestReadableFormatVersion to kFormatVersion.
  std::int64_t format_version = kFormatVersion;
};

std::string ClosedMarkerToJson(const ClosedMarker& marker);
// kCorruption (naming `path`) when the text is not a CLOSED marker.
Result<ClosedMarker> ParseClosedMarker(const std::string& json, const std::string& path);

}  // namespace tstat::io
