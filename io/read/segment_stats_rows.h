// SegmentStatsRows: a segment's stats rows grouped by tensor, for series():
// read with ReadSegmentStats (the header and stats table alone, without the
// histograms and extras a record carries, nor the registry read at open), so
// a series costs one table per segment and no per-record index. Kept in the SegmentCache, where
// the series of other tensors find it.
// Thread safety: immutable once built.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/read/segment_reader.h"

namespace tstat::io {

class SegmentStatsRows {
 public:
  explicit SegmentStatsRows(SegmentContents contents);

  // Calls fn(const StatsRow&) for each stats row of tensor `id`, in file order.
  template <class F>
  void ForEach(std::uint32_t id, F&& fn) const {
    auto it = ranges_.find(id);
    if (it == ranges_.end()) return;
    for (std::uint32_t k = it->second.first; k < it->second.second; ++k) fn(rows_[order_[k]]);
  }
  std::uint64_t ApproxBytes() const;

 private:
  std::vector<StatsRow> rows_;
  std::vector<std::uint32_t> order_;  // row indices grouped by tensor, file order within
  std::unordered_map<std::uint32_t, std::pair<std::uint32_t, std::uint32_t>> ranges_;
};

}  // namespace tstat::io
