#include "host/session/step_records.h"

#include <cassert>
#include <utility>

namespace tstat::host {

std::vector<std::int64_t> ShapeOf(const TensorView& v) {
  return v.shape.empty() ? std::vector<std::int64_t>{v.numel} : v.shape;
}

std::uint64_t ViewBytes(const TensorView& v) {
  return static_cast<std::uint64_t>(v.numel) * DTypeSize(v.dtype);
}

std::string RawCapReason(std::int64_t cap_bytes) {
  return "raw snapshot memory cap (" + std::to_string(cap_bytes >> 20) + " MiB) reached";
}

bool RequestsOnlyStats(const StatsOptions& o) {
  return o.label_classes == 0 && o.linear_histogram.bins == 0 && o.per_channel_axis < 0 &&
         o.sample_count == 0 && o.delta.previous == nullptr && o.confusion.predictions == nullptr &&
         o.count_values.empty();
}

TensorStatsRecord* AddResult(std::uint32_t id, const StatsOptions& options, ReductionResult&& r,
                             StepBatch* batch, std::size_t* filled, bool only_stats) {
  if (!r.status.ok()) {
    batch->drops.push_back({id, "stats", r.status.message(), 0});
    return nullptr;
  }
  std::vector<TensorStatsRecord>& records = batch->stats;
  // In place, only what a result holds is written: a fresh record per
  // tensor writes every member into cold memory.
  const bool reuse = filled != nullptr && *filled < records.size();
  TensorStatsRecord& rec = reuse ? records[*filled] : records.emplace_back();
  if (filled != nullptr) ++*filled;
  rec.tensor_id = id;
  // Label counts come with the stat set (tstat before 0.2 left it out).
  rec.has_stats = true;
  rec.stats = r.stats;
  // Trimmed to its non-zero bins: only the span the engine set is read (the
  // bins were written on the reducing core and are cold here).
  if (r.exponent_histogram) {
    std::vector<std::uint64_t> buffer;
    if (rec.exponent_histogram) buffer = std::move(rec.exponent_histogram->counts);
    rec.exponent_histogram.emplace(*r.exponent_histogram, std::move(buffer));
  } else {
    rec.exponent_histogram.reset();
  }
  // The rest is written only when asked for: the writer's core read those
  // lines last, so each store costs a transfer (and an optional of a
  // trivially copyable payload, such as the delta, is copied whole even
  // when empty).
  if (only_stats) {
    assert(HasOnlyStats(rec));
    return &rec;
  }
  rec.linear_histogram = std::move(r.linear_histogram);
  rec.per_channel = std::move(r.per_channel);
  rec.label_counts = std::move(r.label_counts);
  rec.sample = std::move(r.sample);
  rec.delta = std::move(r.delta);
  rec.confusion = std::move(r.confusion);
  if (!options.count_values.empty()) {
    rec.count_values = options.count_values;
    rec.value_counts = std::move(r.value_counts);
  } else {
    rec.count_values.clear();
    rec.value_counts.clear();
  }
  return &rec;
}

std::uint64_t DropAll(StepBatch* b, const std::string& reason) {
  const std::uint64_t n = b->stats.size() + b->scalars.size() + b->raws.size();
  for (const TensorStatsRecord& r : b->stats) b->drops.push_back({r.tensor_id, "stats", reason, 0});
  for (const ScalarRecord& r : b->scalars) b->drops.push_back({r.tensor_id, "scalar", reason, 0});
  for (const RawSnapshot& r : b->raws) {
    b->drops.push_back({r.tensor_id, "raw", reason, r.bytes.size()});
  }
  b->stats.clear();
  b->scalars.clear();
  b->raws.clear();
  return n;
}

bool RawSnapshots::Reserve(std::uint32_t id, std::uint64_t bytes, StepBatch* batch) {
  if (pipeline_->ReserveRaw(bytes)) return true;
  batch->drops.push_back({id, "raw", RawCapReason(cap_bytes_), bytes});
  pipeline_->CountRawDrop(bytes);
  return false;
}

void RawSnapshots::CopyHost(std::uint32_t id, const TensorView& v, StepBatch* batch,
                            std::uint64_t* reserved) {
  const std::uint64_t bytes = ViewBytes(v);
  if (!Reserve(id, bytes, batch)) return;
  *reserved += bytes;
  batch->raws.push_back({id, v.dtype, ShapeOf(v), buffers_->Copy(v.data, bytes)});
}

}  // namespace tstat::host
