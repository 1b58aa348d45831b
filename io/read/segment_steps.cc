// See segment_steps.h.
#include "io/read/segment_steps.h"

#include <algorithm>
#include <utility>

#include "io/read/step_major_order.h"

namespace tstat::io {
namespace {

using RecordMap =
    std::unordered_map<std::pair<std::int64_t, std::uint32_t>, std::uint32_t, StepTensorHash>;

}  // namespace

SegmentSteps::SegmentSteps(SegmentContents contents) : tables_(std::move(contents.tables)) {
  std::vector<std::uint32_t> order;
  StepMajorOrder(tables_, &order);
  // StepMajorOrder puts steps ascending, a step's rows together: one Step
  // per change of global step.
  const std::vector<StatsRow>& stats = tables_.stats;
  rows_.resize(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const StatsRow& row = stats[order[k]];
    rows_[k] = Placed(row);
    if (steps_.empty() || steps_.back().global_step != row.global_step) {
      steps_.push_back(
          Step{row.global_step, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k)});
    }
    ++steps_.back().end;
  }
  Join();
}

SegmentSteps::SegmentSteps(SegmentContents contents, std::vector<PlacedStatsRow> rows,
                           const std::vector<StepRecords>& steps)
    : tables_(std::move(contents.tables)), rows_(std::move(rows)) {
  std::uint32_t begin = 0;
  for (const StepRecords& s : steps) {
    if (s.count == 0) continue;
    steps_.push_back(Step{s.global_step, begin, begin + s.count});
    begin += s.count;
  }
  Join();
}

template <class F>
void SegmentSteps::ForEachKey(F f) const {
  for (const Step& s : steps_) {
    for (std::uint32_t k = s.begin; k < s.end; ++k) f(k, s.global_step, rows_[k].tensor_id);
  }
}

void SegmentSteps::Join() {
  JoinExpHist();
  const SegmentBuffers& b = tables_;
  const bool any_extras = !b.linear_hist.empty() || !b.channels.empty() || !b.labels.empty() ||
                          !b.samples.empty() || !b.delta.empty() || !b.confusion.empty() ||
                          !b.value_counts.empty();
  if (any_extras) {
    // (global step, tensor id) -> record; a key seen twice (a crafted file)
    // maps to its last record, as WorkerIndex joins it.
    RecordMap records;
    records.reserve(rows_.size());
    ForEachKey([&](std::uint32_t k, std::int64_t g, std::uint32_t id) { records[{g, id}] = k; });
    JoinRecordExtras(b, [&](std::int64_t g, std::uint32_t id) -> RecordExtras* {
      auto it = records.find({g, id});
      return it == records.end() ? nullptr : &extras_[it->second];
    });
  }
  // Fill reads the histogram tables alone (the extras are joined).
  SegmentBuffers kept;
  kept.stats = std::move(tables_.stats);  // memory for the next read (ReleaseTables)
  kept.stats.clear();
  kept.exp_hist = std::move(tables_.exp_hist);
  kept.exp_hist_counts = std::move(tables_.exp_hist_counts);
  tables_ = std::move(kept);
}

// The writer writes a record's exp_hist row when it captures the record, so
// exp_hist walks together with the records in capture order; rows out of
// that order (a crafted file) are joined by key instead.
void SegmentSteps::JoinExpHist() {
  const std::vector<ExpHistRow>& exp = tables_.exp_hist;
  if (exp.empty()) {  // none (or not read): exp_row_ stays empty
    exp_row_.clear();
    return;
  }
  exp_row_.assign(rows_.size(), -1);
  std::size_t j = 0;
  ForEachKey([&](std::uint32_t k, std::int64_t g, std::uint32_t id) {
    if (j < exp.size() && exp[j].global_step == g && exp[j].tensor_id == id) {
      exp_row_[k] = static_cast<std::int64_t>(j++);
    }
  });
  if (j == exp.size()) return;
  exp_row_.assign(rows_.size(), -1);
  RecordMap records;
  records.reserve(rows_.size());
  ForEachKey([&](std::uint32_t k, std::int64_t g, std::uint32_t id) { records[{g, id}] = k; });
  for (std::size_t e = 0; e < exp.size(); ++e) {
    auto it = records.find({exp[e].global_step, exp[e].tensor_id});
    if (it != records.end()) exp_row_[it->second] = static_cast<std::int64_t>(e);
  }
}

const SegmentSteps::Step* SegmentSteps::Find(std::int64_t global_step) const {
  auto it = std::lower_bound(steps_.begin(), steps_.end(), global_step,
                             [](const Step& s, std::int64_t g) { return s.global_step < g; });
  return it != steps_.end() && it->global_step == global_step ? &*it : nullptr;
}

void SegmentSteps::Fill(std::int64_t global_step, std::vector<TensorStatsRecord>* out) const {
  const Step* step = Find(global_step);
  out->resize(step == nullptr ? 0 : step->end - step->begin);
  if (step == nullptr) return;
  static const RecordExtras kNoExtras;
  for (std::size_t k = step->begin; k < step->end; ++k) {
    const PlacedStatsRow& row = rows_[k];
    TensorStatsRecord& r = (*out)[k - step->begin];
    r.tensor_id = row.tensor_id;
    r.has_stats = row.has_stats != 0;
    r.stats = FromStored(row.s);
    const std::int64_t e = exp_row_.empty() ? -1 : exp_row_[k];
    if (e >= 0) {
      const ExpHistRow& h = tables_.exp_hist[static_cast<std::size_t>(e)];
      ExponentBins& bins =
          r.exponent_histogram ? *r.exponent_histogram : r.exponent_histogram.emplace();
      bins.first_bin = static_cast<int>(h.first_bin);
      const auto first = tables_.exp_hist_counts.begin() + static_cast<std::ptrdiff_t>(h.offset);
      bins.counts.assign(first, first + h.num_bins);
    } else {
      r.exponent_histogram.reset();
    }
    if (extras_.empty()) {
      CopyExtras(kNoExtras, &r);
      continue;
    }
    auto x = extras_.find(static_cast<std::uint32_t>(k));
    CopyExtras(x == extras_.end() ? kNoExtras : x->second, &r);
  }
}

SegmentBuffers SegmentSteps::ReleaseTables(std::vector<PlacedStatsRow>* rows) {
  steps_.clear();
  exp_row_.clear();
  extras_.clear();
  *rows = std::move(rows_);
  rows_.clear();
  return std::move(tables_);
}

std::uint64_t SegmentSteps::ApproxBytes() const {
  std::uint64_t total = rows_.size() * sizeof(PlacedStatsRow) +
                        tables_.stats.capacity() * sizeof(StatsRow) +  // kept for reuse
                        exp_row_.size() * sizeof(std::int64_t) +
                        tables_.exp_hist.size() * sizeof(ExpHistRow) +
                        tables_.exp_hist_counts.size() * sizeof(std::uint64_t) + steps_.size() * 64;
  for (const auto& [row, e] : extras_) total += ExtrasBytes(e);
  return total;
}

}  // namespace tstat::io
