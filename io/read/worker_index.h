// WorkerIndex: everything a Trial knows about one worker, built from its
// segments as they are loaded, organised for the Trial queries.
//
// A Trial keeps one per worker built from the segments' metadata only (the
// registry, steps, scalars, raw index, drops: ReadSegmentMetadata), and one
// per segment whose records a query needed (segment_cache.h).
//
// Per tensor id, a TensorSeries holds the saved steps and their stats as
// parallel vectors (keys[i], stats[i], ...), so a series is one vector walk
// and a step lookup one binary search (rows arrive in step order; if a run's
// steps ever go backwards the series is marked unsorted and searched
// linearly). Exponent histograms stay compact (first bin, count, offset into a
// shared pool); the rarer extras (linear histogram, per-channel stats, label
// counts, samples) are kept per row in a side map. Steps map mode steps to
// global steps both ways, per mode.
// Thread safety: none; owned by one Trial.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/read/segment_reader.h"
#include "io/read/sorted_vector_map.h"
#include "io/read/tensor_id_set.h"
#include "tstat/stats_record.h"

namespace tstat::io {

struct ExpHistRef {
  std::uint64_t offset = 0;  // into WorkerIndex::exp_pool
  std::uint16_t first = 0, num = 0;
  bool present = false;
};

struct RecordExtras {
  std::optional<LinearHistogram> linear;
  std::optional<PerChannelStats> channels;
  std::optional<LabelCounts> labels;
  std::optional<ElementSample> sample;
  std::optional<DeltaStats> delta;
  std::optional<ConfusionMatrix> confusion;
  std::vector<std::int64_t> count_values;
  std::vector<std::uint64_t> value_counts;
};

// Hash of a (global step, tensor id) key, the key rows of a segment's tables
// are joined by.
struct StepTensorHash {
  std::size_t operator()(const std::pair<std::int64_t, std::uint32_t>& k) const {
    // Unsigned: a crafted segment's global step may be any int64, and a
    // signed product would overflow.
    return std::hash<std::uint64_t>()(static_cast<std::uint64_t>(k.first) * 1000003u + k.second);
  }
};

// Calls `at(global step, tensor id)` for the row of every extras table of
// `b` (linear histograms, per-channel stats, label counts, samples, deltas,
// confusion matrices, value counts) and fills the RecordExtras it returns
// (none: the row is skipped).
void JoinRecordExtras(const SegmentBuffers& b,
                      const std::function<RecordExtras*(std::int64_t, std::uint32_t)>& at);
// Sets r's extras (every optional and vector) to `e`'s.
void CopyExtras(const RecordExtras& e, TensorStatsRecord* r);
// The memory `e` holds, approximately, with its map node (a cache's unit).
std::uint64_t ExtrasBytes(const RecordExtras& e);

struct TensorSeries {
  std::vector<StepKey> keys;
  std::vector<TensorStats> stats;
  std::vector<std::uint8_t> has_stats;
  std::vector<ExpHistRef> exp;
  std::unordered_map<std::size_t, RecordExtras> extras;  // by row
  bool sorted = true;                                    // keys ascending by global step
  // The row of `global_step`, or -1.
  std::ptrdiff_t Find(std::int64_t global_step) const;
};

struct StepEntry {
  StepKey key;
  double wall_time = 0, step_seconds = 0, capture_seconds = 0;
  std::uint32_t segment = 0;  // the ordinal of its segment in WorkerIndex::segment_files
  std::vector<std::pair<std::uint32_t, std::size_t>> records;  // (tensor id, row), capture order
};

// A segment file added to an index, in the order they were added.
struct SegmentFile {
  std::string path;
  std::uint64_t bytes = 0;
  // Where its stats rows are, when the worker catalog said (series read
  // them through it: stats_chunk_reader.h).
  std::shared_ptr<const StatsLayout> stats_layout;
};

struct ScalarPoint {
  StepKey key;
  double value = 0, wall_time = 0;
};

struct RawRef {
  StepKey key;
  std::string file;     // segment path
  std::string dataset;  // "raw/000000", or kRawPackedDataset
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::uint64_t byte_offset = 0;  // within kRawPackedDataset
  std::uint64_t byte_count = 0;
};

struct WorkerIndex {
  explicit WorkerIndex(int r) : rank(r) {}

  // Adds a loaded (validated) segment.
  void AddSegment(const SegmentContents& segment, const std::string& path,
                  std::uint64_t file_bytes);

  // Room for `steps` more steps, per_mode[mode] more of each mode, and
  // per_scalar[id] more points of each scalar.
  void Reserve(std::size_t steps, const std::map<std::uint8_t, std::size_t>& per_mode,
               const std::unordered_map<std::uint32_t, std::size_t>& per_scalar);

  const TensorInfo* FindTensor(const std::string& name) const;
  // Whether tensor `id` is in the registry.
  bool Knows(std::uint32_t id) const { return known_ids.Contains(id); }
  const TensorSeries* FindSeries(std::uint32_t id) const;
  // The global step of `step` of `mode` (kGlobal: `step` itself) if this
  // worker saved that step.
  std::optional<std::int64_t> GlobalStep(std::int64_t step, Mode mode) const;
  // True when a later step of `mode` (kGlobal: any later step) is loaded, so
  // `step` will never appear in this worker's data.
  bool PassedStep(std::int64_t step, Mode mode) const;
  // The full record of row `row` of tensor `id`.
  TensorStatsRecord MakeRecord(std::uint32_t id, const TensorSeries& series, std::size_t row) const;

  int rank;
  int world_size = 0;  // 0: not known yet
  std::string host;
  std::string config_json;
  bool have_config = false;
  std::int64_t segments = 0;
  std::int64_t format_version = 0;  // of the latest segment or CLOSED marker read (0: none)
  std::uint64_t bytes = 0;
  PipelineCounters counters;
  bool closed = false;  // CLOSED read and every segment listed after it attempted

  std::map<std::uint32_t, TensorInfo> tensors;
  TensorIdSet known_ids;  // the ids of `tensors`
  std::unordered_map<std::string, std::uint32_t> by_name;
  std::unordered_map<std::uint32_t, TensorSeries> series;
  SortedVectorMap<std::int64_t, StepEntry> steps;
  std::map<Mode, SortedVectorMap<std::int64_t, std::int64_t>> mode_to_global;
  std::unordered_map<std::uint32_t, std::vector<ScalarPoint>> scalars;
  std::unordered_map<std::uint32_t, std::vector<RawRef>> raws;
  std::vector<DropRecord> drops;
  std::vector<std::uint64_t> exp_pool;
  std::vector<SegmentFile> segment_files;

  // The memory the index holds, approximately (the segment cache's unit).
  std::uint64_t ApproxBytes() const;
};

}  // namespace tstat::io
