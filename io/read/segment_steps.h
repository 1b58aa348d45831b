// SegmentSteps: the records of one segment by step, for step_records() and a
// single pass over a run (`tstat check`, the rules runner). Built in one pass
// over a ReadSegment result's rows, without WorkerIndex's per-tensor series
// (which a series or record query needs, and a step-by-step walk pays for
// without using), and filled into the caller's records, whose buffers are
// reused from one step to the next.
// Thread safety: immutable once built; Fill may be called from any thread.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "io/read/placed_stats_row.h"
#include "io/read/segment_reader.h"
#include "io/read/worker_index.h"
#include "tstat/stats_record.h"

namespace tstat::io {

class SegmentSteps {
 public:
  // From a segment as read (its stats rows in file order).
  explicit SegmentSteps(SegmentContents contents);
  // The records of each step.
  struct StepRecords {
    std::int64_t global_step = 0;
    std::uint32_t count = 0;
  };
  // From rows in capture order already (StatsChunkReader::ReadCaptureOrder,
  // ReadStep): `steps` ascending, their counts summing to the rows; the
  // contents' other tables (histograms, extras) as read.
  SegmentSteps(SegmentContents contents, std::vector<PlacedStatsRow> rows,
               const std::vector<StepRecords>& steps);

  // Whether the segment holds records of `global_step`.
  bool Has(std::int64_t global_step) const { return Find(global_step) != nullptr; }
  // The records of `global_step`, in the order they were captured, into
  // `out` (resized to their number; every field of every element set).
  void Fill(std::int64_t global_step, std::vector<TensorStatsRecord>* out) const;
  // The memory it holds, approximately (the segment cache's unit).
  std::uint64_t ApproxBytes() const;
  // Gives its tables' memory away (for the next segment's read), and its
  // rows' into *rows; it holds no records after.
  SegmentBuffers ReleaseTables(std::vector<PlacedStatsRow>* rows);

 private:
  struct Step {
    std::int64_t global_step = 0;
    std::uint32_t begin = 0, end = 0;  // its records: [begin, end) of rows_
  };
  const Step* Find(std::int64_t global_step) const;
  // f(k, global step, tensor id) for each record k, in capture order.
  template <class F>
  void ForEachKey(F f) const;
  // Joins the exponent histograms and the extras to the records, then keeps
  // only the tables Fill reads.
  void Join();
  void JoinExpHist();

  SegmentBuffers tables_;
  std::vector<PlacedStatsRow> rows_;                        // every record, in capture order
  std::vector<Step> steps_;                                 // ascending global step
  std::vector<std::int64_t> exp_row_;                       // per record: its exp_hist row, or -1
  std::unordered_map<std::uint32_t, RecordExtras> extras_;  // by record
};

}  // namespace tstat::io
