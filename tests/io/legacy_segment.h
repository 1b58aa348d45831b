// Turns a sealed segment written by this version into one of an older
// format_version, for the legacy reader's tests: the root string attributes,
// the config, tensor names, collections and drop kinds/reasons become
// variable-length strings (as versions 1 and 2 stored them), and for version
// 1 raw_index gets variable-length `dataset` and `shape` members (without
// the byte columns unless `byte_columns`) and loses raw_shapes. The row
// layouts are written out here, independently of io/segment_legacy_reader.
#pragma once

#include <string>

#include "tstat/status.h"

namespace tstat::io::testing {

Status RewriteAsLegacySegment(const std::string& path, int format_version,
                              bool byte_columns = true);

// Sets TSTAT_READ_LEGACY_SEGMENTS=1 for its lifetime (the previous value,
// or none, afterwards). Tests that use it run single-threaded.
class ScopedLegacySegments {
 public:
  ScopedLegacySegments();
  ~ScopedLegacySegments();
  ScopedLegacySegments(const ScopedLegacySegments&) = delete;
  ScopedLegacySegments& operator=(const ScopedLegacySegments&) = delete;

 private:
  bool had_ = false;
  std::string previous_;
};

}  // namespace tstat::io::testing
