// See segment_buffers.h.
#include "io/format/segment_buffers.h"

namespace tstat::io {

// The next segment reuses the memory (a new segment's buffers would
// otherwise be allocated, page-faulted in and unmapped again every flush).
void SegmentBuffers::Clear() {
  steps.clear();
  stats.clear();
  stats_capture_index.clear();
  exp_hist.clear();
  exp_hist_counts.clear();
  linear_hist.clear();
  linear_hist_counts.clear();
  channels.clear();
  labels.clear();
  label_counts.clear();
  samples.clear();
  sample_positions.clear();
  sample_values.clear();
  delta.clear();
  confusion.clear();
  confusion_counts.clear();
  value_counts.clear();
  counted_values.clear();
  counted_counts.clear();
  scalars.clear();
  drops.clear();
  raw_index.clear();
  raw_shapes.clear();
}

}  // namespace tstat::io
