// See segment_rows.h.
#include "io/write/segment_rows.h"

#include <cstring>

namespace tstat::io {
namespace {

template <class Row>
Row KeyedRow(const StepKey& key, std::uint32_t tensor_id) {
  Row row{};
  row.global_step = key.global_step;
  row.mode = static_cast<std::uint8_t>(key.mode);
  row.mode_step = key.mode_step;
  row.tensor_id = tensor_id;
  return row;
}

}  // namespace

Status StreamedRows::Start(int level) {
  TSTAT_RETURN_IF_ERROR(stats.Reset(level));
  exp_hist_counts.Reset(level);
  TSTAT_RETURN_IF_ERROR(channels.Reset(ChannelRowType, level));
  return exp_hist.Reset(ExpHistRowType, level);
}

bool StreamedRows::FitsCounts(const StepBatch& batch) const {
  if (exp_hist_counts.width_bytes() == 0) return true;
  std::uint64_t bits = 0;
  for (const TensorStatsRecord& r : batch.stats) {
    if (!r.exponent_histogram) continue;
    for (const std::uint64_t c : r.exponent_histogram->counts) bits |= c;
  }
  return exp_hist_counts.Fits(bits);
}

Status StreamedRows::Finish(hid_t file, const std::string& path) {
  TSTAT_RETURN_IF_ERROR(stats.Finish(file, &deflater, path));
  TSTAT_RETURN_IF_ERROR(exp_hist.Finish(file, &deflater, path));
  TSTAT_RETURN_IF_ERROR(channels.Finish(file, &deflater, path));
  return exp_hist_counts.Finish(file, &deflater, path);
}

void StreamedRows::Close() {
  stats.Close();
  exp_hist.Close();
  exp_hist_counts.Close();
  channels.Close();
}

namespace {

// The delta, confusion and value-count parts of one record.
void AppendDerived(const StepKey& key, const TensorStatsRecord& r, SegmentBuffers* b) {
  if (r.delta) {
    DeltaRow d = KeyedRow<DeltaRow>(key, r.tensor_id);
    d.count = r.delta->count;
    d.changed_count = r.delta->changed_count;
    d.nonfinite_pairs = r.delta->nonfinite_pairs;
    d.l1 = r.delta->l1;
    d.l2 = r.delta->l2;
    d.amax = r.delta->amax;
    b->delta.push_back(d);
  }
  if (r.confusion) {
    ConfusionRow c = KeyedRow<ConfusionRow>(key, r.tensor_id);
    c.classes = static_cast<std::uint32_t>(r.confusion->classes);
    c.invalid = r.confusion->invalid;
    c.offset = b->confusion_counts.size();
    b->confusion_counts.insert(b->confusion_counts.end(), r.confusion->counts.begin(),
                               r.confusion->counts.end());
    b->confusion.push_back(c);
  }
  if (!r.count_values.empty() || !r.value_counts.empty()) {
    ValueCountsRow v = KeyedRow<ValueCountsRow>(key, r.tensor_id);
    v.num_values = static_cast<std::uint32_t>(r.count_values.size());
    v.offset = b->counted_values.size();
    b->counted_values.insert(b->counted_values.end(), r.count_values.begin(), r.count_values.end());
    b->counted_counts.insert(b->counted_counts.end(), r.value_counts.begin(), r.value_counts.end());
    b->value_counts.push_back(v);
  }
}

}  // namespace

Status AppendBatch(const StepBatch& batch, hid_t file, StreamedRows* streamed,
                   const std::string& path, SegmentBuffers* b) {
  const StepKey& key = batch.key;
  b->steps.push_back(StepRow{key.global_step, static_cast<std::uint8_t>(key.mode), key.mode_step,
                             batch.wall_time, batch.step_seconds, batch.capture_seconds});
  std::uint64_t histograms = 0;
  std::uint64_t channel_rows = 0;
  for (const TensorStatsRecord& r : batch.stats) {
    if (r.per_channel) channel_rows += r.per_channel->channels.size();
  }
  // The level-1 encoder matches a channel's row with its row one step earlier.
  if (channel_rows) streamed->channels.set_step_rows(channel_rows);
  std::uint32_t capture_index = 0;
  for (const TensorStatsRecord& r : batch.stats) {
    StatsRow row = KeyedRow<StatsRow>(key, r.tensor_id);
    row.has_stats = r.has_stats ? 1 : 0;
    row.s = ToStored(r.stats);
    streamed->stats.Append(row, capture_index++);
    if (r.exponent_histogram) {  // checked valid() by the writer
      const std::vector<std::uint64_t>& counts = r.exponent_histogram->counts;
      // Usually trimmed already; a hand-built record may carry zero bins at either end.
      const NonZeroBins range = FindNonZeroBins(counts.data(), static_cast<int>(counts.size()));
      ExpHistRow e = KeyedRow<ExpHistRow>(key, r.tensor_id);
      e.first_bin = static_cast<std::uint16_t>(
          range.count ? r.exponent_histogram->first_bin + range.first : 0);
      e.num_bins = static_cast<std::uint16_t>(range.count);
      e.offset = streamed->exp_hist_counts.size();
      TSTAT_RETURN_IF_ERROR(streamed->exp_hist_counts.Append(file, counts.data() + range.first,
                                                             static_cast<std::size_t>(range.count),
                                                             &streamed->deflater, path));
      TSTAT_RETURN_IF_ERROR(streamed->exp_hist.Append(file, &e, &streamed->deflater, path));
      ++histograms;
    }
    if (r.linear_histogram) {
      const LinearHistogram& h = *r.linear_histogram;
      LinearHistRow l = KeyedRow<LinearHistRow>(key, r.tensor_id);
      l.lo = h.lo;
      l.hi = h.hi;
      l.below = h.below;
      l.above = h.above;
      l.num_bins = static_cast<std::uint32_t>(h.counts.size());
      l.offset = b->linear_hist_counts.size();
      b->linear_hist_counts.insert(b->linear_hist_counts.end(), h.counts.begin(), h.counts.end());
      b->linear_hist.push_back(l);
    }
    if (r.per_channel) {
      for (std::size_t c = 0; c < r.per_channel->channels.size(); ++c) {
        ChannelRow ch = KeyedRow<ChannelRow>(key, r.tensor_id);
        ch.axis = r.per_channel->axis;
        ch.channel = static_cast<std::uint32_t>(c);
        ch.s = ToStored(r.per_channel->channels[c]);
        TSTAT_RETURN_IF_ERROR(streamed->channels.Append(file, &ch, &streamed->deflater, path));
      }
    }
    if (r.label_counts) {
      LabelRow lr = KeyedRow<LabelRow>(key, r.tensor_id);
      lr.out_of_range = r.label_counts->out_of_range;
      lr.num_classes = static_cast<std::uint32_t>(r.label_counts->counts.size());
      lr.offset = b->label_counts.size();
      b->label_counts.insert(b->label_counts.end(), r.label_counts->counts.begin(),
                             r.label_counts->counts.end());
      b->labels.push_back(lr);
    }
    if (r.sample) {
      SampleRow sr = KeyedRow<SampleRow>(key, r.tensor_id);
      sr.num_values = r.sample->values.size();
      sr.offset = b->sample_values.size();
      b->sample_positions.insert(b->sample_positions.end(), r.sample->positions.begin(),
                                 r.sample->positions.end());
      b->sample_values.insert(b->sample_values.end(), r.sample->values.begin(),
                              r.sample->values.end());
      b->samples.push_back(sr);
    }
  }
  // The level-1 encoder's hint for the chunks written from here on (steps
  // usually have the same rows).
  streamed->exp_hist.set_step_rows(histograms);
  for (const TensorStatsRecord& r : batch.stats) AppendDerived(key, r, b);
  for (const ScalarRecord& s : batch.scalars) {
    ScalarRow row{};
    row.global_step = key.global_step;
    row.mode = static_cast<std::uint8_t>(key.mode);
    row.mode_step = key.mode_step;
    row.scalar_id = s.tensor_id;
    row.value = s.value;
    row.wall_time = s.wall_time;
    b->scalars.push_back(row);
  }
  for (const DropRecord& d : batch.drops) b->drops.push_back(DropEntry{key, d});
  return Status::OK();
}

void AppendRawRow(const StepKey& key, const RawSnapshot& raw, const char* dataset,
                  std::uint64_t byte_offset, std::uint64_t byte_count, SegmentBuffers* b) {
  RawIndexRow row = KeyedRow<RawIndexRow>(key, raw.tensor_id);
  // Writer-made names ("raw/" and a decimal index) always fit.
  std::memcpy(row.dataset, dataset, strnlen(dataset, kRawDatasetChars));
  SetDTypeChars(raw.dtype, row.dtype);
  row.rank = static_cast<std::uint32_t>(raw.shape.size());
  row.shape_offset = b->raw_shapes.size();
  row.byte_offset = byte_offset;
  row.byte_count = byte_count;
  b->raw_index.push_back(row);
  b->raw_shapes.insert(b->raw_shapes.end(), raw.shape.begin(), raw.shape.end());
}

}  // namespace tstat::io
