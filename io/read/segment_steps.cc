// See segment_steps.h.
#include "io/read/segment_steps.h"

#include <algorithm>
#include <utility>

#include "io/read/step_major_order.h"

namespace tstat::io {
namespace {

using RowMap =
    std::unordered_map<std::pair<std::int64_t, std::uint32_t>, std::uint32_t, StepTensorHash>;

// (global step, tensor id) -> stats row; a key seen twice (a crafted file)
// maps to its last row, as WorkerIndex joins it.
RowMap RowsByKey(const std::vector<StatsRow>& stats) {
  RowMap rows;
  rows.reserve(stats.size());
  for (std::size_t i = 0; i < stats.size(); ++i) {
    rows[{stats[i].global_step, stats[i].tensor_id}] = static_cast<std::uint32_t>(i);
  }
  return rows;
}

}  // namespace

SegmentSteps::SegmentSteps(SegmentContents contents) : tables_(std::move(contents.tables)) {
  const std::vector<StatsRow>& stats = tables_.stats;
  StepMajorOrder(tables_, &order_);
  // StepMajorOrder puts steps ascending, a step's rows together: one Step
  // per change of global step.
  for (std::size_t k = 0; k < order_.size(); ++k) {
    const std::int64_t g = stats[order_[k]].global_step;
    if (steps_.empty() || steps_.back().global_step != g) {
      steps_.push_back(Step{g, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k)});
    }
    ++steps_.back().end;
  }
  bool identity = true;
  for (std::size_t k = 0; k < order_.size() && identity; ++k) identity = order_[k] == k;
  if (identity) order_.clear();
  Join();
}

SegmentSteps::SegmentSteps(SegmentContents contents, const std::vector<StepRecords>& steps)
    : tables_(std::move(contents.tables)) {
  std::uint32_t begin = 0;
  for (const StepRecords& s : steps) {
    if (s.count == 0) continue;
    steps_.push_back(Step{s.global_step, begin, begin + s.count});
    begin += s.count;
  }
  Join();
}

void SegmentSteps::Join() {
  JoinExpHist();
  const SegmentBuffers& b = tables_;
  const bool any_extras = !b.linear_hist.empty() || !b.channels.empty() || !b.labels.empty() ||
                          !b.samples.empty() || !b.delta.empty() || !b.confusion.empty() ||
                          !b.value_counts.empty();
  if (any_extras) {
    const RowMap rows = RowsByKey(tables_.stats);
    JoinRecordExtras(b, [&](std::int64_t g, std::uint32_t id) -> RecordExtras* {
      auto it = rows.find({g, id});
      return it == rows.end() ? nullptr : &extras_[it->second];
    });
  }
  // Fill reads the stats and histogram tables alone (the extras are joined).
  SegmentBuffers kept;
  kept.stats = std::move(tables_.stats);
  kept.exp_hist = std::move(tables_.exp_hist);
  kept.exp_hist_counts = std::move(tables_.exp_hist_counts);
  tables_ = std::move(kept);
}

// The writer writes a record's exp_hist row when it captures the record, so
// exp_hist walks together with the stats rows in capture order; rows out of
// that order (a crafted file) are joined by key instead.
void SegmentSteps::JoinExpHist() {
  const std::vector<StatsRow>& stats = tables_.stats;
  const std::vector<ExpHistRow>& exp = tables_.exp_hist;
  if (exp.empty()) {  // none (or not read): exp_row_ stays empty
    exp_row_.clear();
    return;
  }
  exp_row_.assign(stats.size(), -1);
  std::size_t j = 0;
  for (std::size_t k = 0; k < stats.size() && j < exp.size(); ++k) {
    if (k + 8 < stats.size()) __builtin_prefetch(&stats[Row(k + 8)]);
    const std::uint32_t i = Row(k);
    if (exp[j].global_step == stats[i].global_step && exp[j].tensor_id == stats[i].tensor_id) {
      exp_row_[i] = static_cast<std::int64_t>(j++);
    }
  }
  if (j == exp.size()) return;
  exp_row_.assign(stats.size(), -1);
  const RowMap rows = RowsByKey(stats);
  for (std::size_t k = 0; k < exp.size(); ++k) {
    auto it = rows.find({exp[k].global_step, exp[k].tensor_id});
    if (it != rows.end()) exp_row_[it->second] = static_cast<std::int64_t>(k);
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
  // Rows in file order (format 4 stores them by tensor) are a table's length
  // apart, each a cache miss unless fetched ahead.
  constexpr std::size_t kAhead = 8;
  const bool ahead = !order_.empty();
  for (std::size_t k = step->begin; k < step->end; ++k) {
    if (ahead && k + kAhead < step->end) {
      const auto* next = reinterpret_cast<const char*>(&tables_.stats[order_[k + kAhead]]);
      for (std::size_t line = 0; line < sizeof(StatsRow); line += 64) {
        __builtin_prefetch(next + line);
      }
    }
    const std::uint32_t i = Row(k);
    const StatsRow& row = tables_.stats[i];
    TensorStatsRecord& r = (*out)[k - step->begin];
    r.tensor_id = row.tensor_id;
    r.has_stats = row.has_stats != 0;
    r.stats = FromStored(row.s);
    const std::int64_t e = exp_row_.empty() ? -1 : exp_row_[i];
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
    auto x = extras_.find(i);
    CopyExtras(x == extras_.end() ? kNoExtras : x->second, &r);
  }
}

SegmentBuffers SegmentSteps::ReleaseTables() {
  steps_.clear();
  order_.clear();
  exp_row_.clear();
  extras_.clear();
  return std::move(tables_);
}

std::uint64_t SegmentSteps::ApproxBytes() const {
  std::uint64_t total = tables_.stats.size() * sizeof(StatsRow) + order_.size() * 4 +
                        exp_row_.size() * sizeof(std::int64_t) +
                        tables_.exp_hist.size() * sizeof(ExpHistRow) +
                        tables_.exp_hist_counts.size() * sizeof(std::uint64_t) + steps_.size() * 64;
  for (const auto& [row, e] : extras_) total += ExtrasBytes(e);
  return total;
}

}  // namespace tstat::io
