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

// Turns a sealed segment of this version (4) into one of version 3: the
// stats rows in capture order, without stats_capture_index and
// stats_tensors, and format_version 3 in the header and its attribute.
Status RewriteAsVersion3Segment(const std::string& path);

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
