// What a segment says about itself (its `header` table and root
// attributes): written by io/write, read back by io/read.
#pragma once

#include <cstdint>
#include <string>

#include "io/format/segment_schema.h"

namespace tstat::io {

struct SegmentHeader {
  int rank = 0;
  int world_size = 1;
  std::string host;
  std::int64_t segment_index = 0;
  std::string config_json;
  std::string tstat_version;
  double created_unix_time = 0.0;
  // What a read segment declares (kOldestReadableFormatVersion or later); the
  // writer always writes kFormatVersion.
  std::int64_t format_version = kFormatVersion;
};

}  // namespace tstat::io
