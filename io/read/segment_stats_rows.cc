// See segment_stats_rows.h.
#include "io/read/segment_stats_rows.h"

namespace tstat::io {

SegmentStatsRows::SegmentStatsRows(SegmentContents contents)
    : rows_(std::move(contents.tables.stats)) {
  // A counting sort by tensor: counts, then each tensor's first slot, then
  // the rows in file order.
  for (const StatsRow& r : rows_) ++ranges_[r.tensor_id].second;
  std::uint32_t next = 0;
  for (auto& [id, range] : ranges_) {
    const std::uint32_t count = range.second;
    range = {next, next};
    next += count;
  }
  order_.resize(rows_.size());
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    order_[ranges_[rows_[i].tensor_id].second++] = static_cast<std::uint32_t>(i);
  }
}

std::uint64_t SegmentStatsRows::ApproxBytes() const {
  return rows_.size() * (sizeof(StatsRow) + sizeof(std::uint32_t)) + ranges_.size() * 48;
}

}  // namespace tstat::io
