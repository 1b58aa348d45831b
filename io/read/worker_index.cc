// See worker_index.h.
#include "io/read/worker_index.h"

#include <algorithm>

#include "io/read/step_major_order.h"

namespace tstat::io {
namespace {

StepKey KeyOf(std::int64_t global_step, std::uint8_t mode, std::int64_t mode_step) {
  return StepKey{global_step, static_cast<Mode>(mode), mode_step};
}

// v[offset : offset + n], a record's payload in a segment's flat array (the
// reader checked the range).
template <class T>
std::vector<T> Slice(const std::vector<T>& v, std::uint64_t offset, std::uint64_t n) {
  const auto first = v.begin() + static_cast<std::ptrdiff_t>(offset);
  return std::vector<T>(first, first + static_cast<std::ptrdiff_t>(n));
}

}  // namespace

void JoinRecordExtras(const SegmentBuffers& b,
                      const std::function<RecordExtras*(std::int64_t, std::uint32_t)>& at) {
  for (const LinearHistRow& r : b.linear_hist) {
    RecordExtras* e = at(r.global_step, r.tensor_id);
    if (e == nullptr) continue;
    LinearHistogram h;
    h.lo = r.lo;
    h.hi = r.hi;
    h.below = r.below;
    h.above = r.above;
    h.counts = Slice(b.linear_hist_counts, r.offset, r.num_bins);
    e->linear = std::move(h);
  }
  for (const ChannelRow& r : b.channels) {
    RecordExtras* e = at(r.global_step, r.tensor_id);
    if (e == nullptr) continue;
    auto& pc = e->channels;
    if (!pc) pc.emplace();
    pc->axis = r.axis;
    if (pc->channels.size() <= r.channel)
      pc->channels.resize(static_cast<std::size_t>(r.channel) + 1);
    pc->channels[r.channel] = FromStored(r.s);
  }
  for (const LabelRow& r : b.labels) {
    RecordExtras* e = at(r.global_step, r.tensor_id);
    if (e == nullptr) continue;
    LabelCounts l;
    l.out_of_range = r.out_of_range;
    l.counts = Slice(b.label_counts, r.offset, r.num_classes);
    e->labels = std::move(l);
  }
  for (const SampleRow& r : b.samples) {
    RecordExtras* e = at(r.global_step, r.tensor_id);
    if (e == nullptr) continue;
    ElementSample sample;
    sample.positions = Slice(b.sample_positions, r.offset, r.num_values);
    sample.values = Slice(b.sample_values, r.offset, r.num_values);
    e->sample = std::move(sample);
  }
  for (const DeltaRow& r : b.delta) {
    RecordExtras* e = at(r.global_step, r.tensor_id);
    if (e == nullptr) continue;
    e->delta = DeltaStats{r.count, r.changed_count, r.nonfinite_pairs, r.l1, r.l2, r.amax};
  }
  for (const ConfusionRow& r : b.confusion) {
    RecordExtras* e = at(r.global_step, r.tensor_id);
    if (e == nullptr) continue;
    ConfusionMatrix m;
    m.classes = static_cast<int>(r.classes);
    m.invalid = r.invalid;
    m.counts = Slice(b.confusion_counts, r.offset, std::uint64_t{r.classes} * r.classes);
    e->confusion = std::move(m);
  }
  for (const ValueCountsRow& r : b.value_counts) {
    RecordExtras* e = at(r.global_step, r.tensor_id);
    if (e == nullptr) continue;
    e->count_values = Slice(b.counted_values, r.offset, r.num_values);
    e->value_counts = Slice(b.counted_counts, r.offset, r.num_values);
  }
}

std::uint64_t ExtrasBytes(const RecordExtras& e) {
  std::uint64_t total = 256;  // a map node and its optionals
  if (e.channels) total += e.channels->channels.size() * sizeof(TensorStats);
  if (e.linear) total += e.linear->counts.size() * sizeof(std::uint64_t);
  if (e.labels) total += e.labels->counts.size() * sizeof(std::uint64_t);
  if (e.confusion) total += e.confusion->counts.size() * sizeof(std::uint64_t);
  if (e.sample) total += e.sample->values.size() * 16;
  total += (e.count_values.size() + e.value_counts.size()) * 8;
  return total;
}

void CopyExtras(const RecordExtras& e, TensorStatsRecord* r) {
  r->linear_histogram = e.linear;
  r->per_channel = e.channels;
  r->label_counts = e.labels;
  r->sample = e.sample;
  r->delta = e.delta;
  r->confusion = e.confusion;
  r->count_values = e.count_values;
  r->value_counts = e.value_counts;
}

std::ptrdiff_t TensorSeries::Find(std::int64_t global_step) const {
  if (sorted) {
    auto it = std::lower_bound(keys.begin(), keys.end(), global_step,
                               [](const StepKey& k, std::int64_t g) { return k.global_step < g; });
    if (it != keys.end() && it->global_step == global_step) return it - keys.begin();
    return -1;
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].global_step == global_step) return static_cast<std::ptrdiff_t>(i);
  }
  return -1;
}

void WorkerIndex::AddSegment(const SegmentContents& s, const std::string& path,
                             std::uint64_t file_bytes) {
  world_size = s.header.world_size;
  host = s.header.host;
  format_version = s.header.format_version;
  if (!have_config) {
    config_json = s.header.config_json;
    have_config = true;
  }
  ++segments;
  bytes += file_bytes;
  const auto ordinal = static_cast<std::uint32_t>(segment_files.size());
  segment_files.push_back(SegmentFile{path, file_bytes, s.stats_layout});
  if (s.counters) counters = *s.counters;
  for (const TensorInfo& t : s.tensors) {
    tensors[t.id] = t;
    by_name.emplace(t.name, t.id);
    known_ids.Insert(t.id);
  }

  const SegmentBuffers& b = s.tables;
  for (const StepRow& r : b.steps) {
    StepEntry& e = steps[r.global_step];
    e.key = KeyOf(r.global_step, r.mode, r.mode_step);
    e.wall_time = r.wall_time;
    e.step_seconds = r.step_seconds;
    e.capture_seconds = r.capture_seconds;
    e.segment = ordinal;
    mode_to_global[e.key.mode][r.mode_step] = r.global_step;
  }

  // (global step, tensor id) -> row of this segment's stats, for the extras.
  std::unordered_map<std::pair<std::int64_t, std::uint32_t>, std::size_t, StepTensorHash> rows;
  rows.reserve(b.stats.size());
  std::vector<std::uint32_t> order;  // capture order: steps ascending
  StepMajorOrder(b, &order);
  for (const std::uint32_t i : order) {
    const StatsRow& r = b.stats[i];
    TensorSeries& ts = series[r.tensor_id];
    const StepKey key = KeyOf(r.global_step, r.mode, r.mode_step);
    if (!ts.keys.empty() && ts.keys.back().global_step >= key.global_step) ts.sorted = false;
    const std::size_t row = ts.keys.size();
    ts.keys.push_back(key);
    ts.stats.push_back(FromStored(r.s));
    ts.has_stats.push_back(r.has_stats);
    ts.exp.emplace_back();
    rows[{r.global_step, r.tensor_id}] = row;
    auto [step, added] = steps.try_emplace(r.global_step);
    if (added) {  // a stats row without its steps row
      step->second.key = key;
      step->second.segment = ordinal;
    }
    step->second.records.emplace_back(r.tensor_id, row);
  }
  auto row_of = [&](std::int64_t g, std::uint32_t id) -> std::ptrdiff_t {
    auto it = rows.find({g, id});
    return it == rows.end() ? -1 : static_cast<std::ptrdiff_t>(it->second);
  };
  for (const ExpHistRow& r : b.exp_hist) {
    const std::ptrdiff_t row = row_of(r.global_step, r.tensor_id);
    if (row < 0) continue;
    ExpHistRef& ref = series[r.tensor_id].exp[static_cast<std::size_t>(row)];
    ref.present = true;
    ref.first = r.first_bin;
    ref.num = r.num_bins;
    ref.offset = exp_pool.size();
    exp_pool.insert(exp_pool.end(),
                    b.exp_hist_counts.begin() + static_cast<std::ptrdiff_t>(r.offset),
                    b.exp_hist_counts.begin() + static_cast<std::ptrdiff_t>(r.offset + r.num_bins));
  }
  JoinRecordExtras(b, [&](std::int64_t g, std::uint32_t id) -> RecordExtras* {
    const std::ptrdiff_t row = row_of(g, id);
    if (row < 0) return nullptr;
    return &series[id].extras[static_cast<std::size_t>(row)];
  });
  for (const ScalarRow& r : b.scalars) {
    scalars[r.scalar_id].push_back(
        ScalarPoint{KeyOf(r.global_step, r.mode, r.mode_step), r.value, r.wall_time});
  }
  for (const RawIndexRow& r : b.raw_index) {  // checked by ReadSegment
    DType dtype = DType::kFloat32;
    ParseDTypeChars(r.dtype, &dtype);
    raws[r.tensor_id].push_back(RawRef{KeyOf(r.global_step, r.mode, r.mode_step), path,
                                       RawDatasetName(r), dtype, RawShape(r, b.raw_shapes),
                                       r.byte_offset, r.byte_count});
  }
  for (const DropEntry& d : b.drops) drops.push_back(d.drop);
}

void WorkerIndex::Reserve(std::size_t more_steps,
                          const std::map<std::uint8_t, std::size_t>& per_mode,
                          const std::unordered_map<std::uint32_t, std::size_t>& per_scalar) {
  steps.reserve(steps.size() + more_steps);
  for (const auto& [mode, n] : per_mode) {
    auto& m = mode_to_global[static_cast<Mode>(mode)];
    m.reserve(m.size() + n);
  }
  for (const auto& [id, n] : per_scalar) {
    std::vector<ScalarPoint>& points = scalars[id];
    points.reserve(points.size() + n);
  }
}

std::uint64_t WorkerIndex::ApproxBytes() const {
  constexpr std::uint64_t kPerRow = sizeof(StepKey) + sizeof(TensorStats) + 1 + sizeof(ExpHistRef);
  std::uint64_t total = exp_pool.size() * sizeof(std::uint64_t);
  for (const auto& [id, ts] : series) {
    total += ts.keys.size() * kPerRow;
    for (const auto& [row, e] : ts.extras) total += ExtrasBytes(e);
  }
  for (const auto& [g, e] : steps) total += 96 + e.records.size() * 16;
  return total;
}

const TensorInfo* WorkerIndex::FindTensor(const std::string& name) const {
  auto it = by_name.find(name);
  if (it == by_name.end()) return nullptr;
  auto t = tensors.find(it->second);
  return t == tensors.end() ? nullptr : &t->second;
}

const TensorSeries* WorkerIndex::FindSeries(std::uint32_t id) const {
  auto it = series.find(id);
  return it == series.end() ? nullptr : &it->second;
}

std::optional<std::int64_t> WorkerIndex::GlobalStep(std::int64_t step, Mode mode) const {
  if (mode == Mode::kGlobal) {
    if (steps.count(step)) return step;
    return std::nullopt;
  }
  auto m = mode_to_global.find(mode);
  if (m == mode_to_global.end()) return std::nullopt;
  auto it = m->second.find(step);
  if (it == m->second.end()) return std::nullopt;
  return it->second;
}

bool WorkerIndex::PassedStep(std::int64_t step, Mode mode) const {
  if (mode == Mode::kGlobal) return !steps.empty() && steps.rbegin()->first > step;
  auto m = mode_to_global.find(mode);
  return m != mode_to_global.end() && !m->second.empty() && m->second.rbegin()->first > step;
}

TensorStatsRecord WorkerIndex::MakeRecord(std::uint32_t id, const TensorSeries& ts,
                                          std::size_t row) const {
  TensorStatsRecord r;
  r.tensor_id = id;
  r.has_stats = ts.has_stats[row] != 0;
  r.stats = ts.stats[row];
  const ExpHistRef& e = ts.exp[row];
  if (e.present) {
    ExponentBins& h = r.exponent_histogram.emplace();
    h.first_bin = static_cast<int>(e.first);
    h.counts.assign(exp_pool.begin() + static_cast<std::ptrdiff_t>(e.offset),
                    exp_pool.begin() + static_cast<std::ptrdiff_t>(e.offset + e.num));
  }
  auto it = ts.extras.find(row);
  if (it != ts.extras.end()) CopyExtras(it->second, &r);
  return r;
}

}  // namespace tstat::io
