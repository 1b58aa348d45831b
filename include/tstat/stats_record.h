// Records: what one captured step consists of, as it travels from the capture
// API through the pipeline to storage, to the in-process rule engine, and back
// out of the reader. Plain values, no behaviour; safe to copy between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tstat/dtype.h"
#include "tstat/stats.h"
#include "tstat/tensor_view.h"

namespace tstat {

// Training modes, numbered as smdebug numbers them.
enum class Mode : std::uint8_t { kTrain = 1, kEval = 2, kPredict = 3, kGlobal = 4 };
inline const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kTrain: return "TRAIN";
    case Mode::kEval: return "EVAL";
    case Mode::kPredict: return "PREDICT";
    case Mode::kGlobal: return "GLOBAL";
  }
  return "UNKNOWN";
}
// Accepts TRAIN/EVAL/PREDICT/GLOBAL in any case.
inline bool ParseMode(const std::string& s, Mode* out) {
  std::string u;
  for (char c : s) u += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  for (Mode m : {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}) {
    if (u == ModeName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

// A step: the global step counts every step; the mode step counts the steps of
// its mode only.
struct StepKey {
  std::int64_t global_step = 0;
  Mode mode = Mode::kGlobal;
  std::int64_t mode_step = 0;
};

enum class TensorKind : std::uint8_t { kTensor = 0, kScalar = 1 };

// One registered tensor (or scalar name) of one worker. Ids are dense per
// worker, assigned in registration order, never reused.
struct TensorInfo {
  std::uint32_t id = 0;
  std::string name;  // verbatim: any bytes of valid UTF-8, '/', quotes, spaces
  TensorKind kind = TensorKind::kTensor;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  MemorySpace space = MemorySpace::kHost;
  std::vector<std::string> collections;
};

// The reductions of one tensor at one step.
struct TensorStatsRecord {
  std::uint32_t tensor_id = 0;
  TensorStats stats;  // absent (all zero counts) when only label counts were asked
  bool has_stats = true;
  std::optional<ExponentBins> exponent_histogram;  // the non-zero range
  std::optional<LinearHistogram> linear_histogram;
  std::optional<PerChannelStats> per_channel;
  std::optional<LabelCounts> label_counts;
  std::optional<ElementSample> sample;
  std::optional<DeltaStats> delta;
  std::optional<ConfusionMatrix> confusion;
  std::vector<std::int64_t> count_values;     // the values counted ...
  std::vector<std::uint64_t> value_counts;    // ... and their counts
};

struct ScalarRecord {
  std::uint32_t tensor_id = 0;  // a TensorInfo of kind kScalar
  double value = 0.0;
  double wall_time = 0.0;  // seconds since the Unix epoch
};

// Immutable bytes shared by reference: a whole buffer, or a slice of a larger
// one kept alive by the slice (the small raw snapshots of a step are slices
// of one slab, so copying them costs no allocation). Copies share the bytes.
class SharedBytes {
 public:
  SharedBytes() = default;
  // Takes `bytes` over.
  explicit SharedBytes(std::vector<std::uint8_t> bytes) {
    auto owned = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes));
    data_ = owned->data();
    size_ = owned->size();
    owner_ = std::move(owned);
  }
  // [data, data + size), valid while `owner` lives.
  SharedBytes(std::shared_ptr<const void> owner, const std::uint8_t* data, std::size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::uint8_t* begin() const { return data_; }
  const std::uint8_t* end() const { return data_ + size_; }
  std::vector<std::uint8_t> ToVector() const { return {begin(), end()}; }

 private:
  std::shared_ptr<const void> owner_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// A raw copy of a tensor's bytes (host memory).
struct RawSnapshot {
  std::uint32_t tensor_id = 0;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  SharedBytes bytes;
};

// Data that had to be dropped, recorded so the loss is never silent.
struct DropRecord {
  std::uint32_t tensor_id = 0;
  std::string kind;    // "raw" (snapshot over the memory cap), "stats", ...
  std::string reason;  // e.g. "raw snapshot memory cap (256 MiB) reached"
  std::uint64_t bytes = 0;
};

// Everything one worker captured at one step.
struct StepBatch {
  StepKey key;
  double wall_time = 0.0;         // when the step ended, seconds since the epoch
  double step_seconds = 0.0;      // wall time of the step (begin to end), 0 if unknown
  double capture_seconds = 0.0;   // time the training thread spent inside tstat calls
  std::vector<TensorStatsRecord> stats;
  std::vector<ScalarRecord> scalars;
  std::vector<RawSnapshot> raws;
  std::vector<DropRecord> drops;
};

// Totals over every step ended so far, saved or not: the capture overhead
// of the run is capture_seconds / step_seconds. A step's time runs from
// BeginStep (or the previous EndStep) to its EndStep; its capture time is
// what the training thread spent inside tstat calls during it.
struct CaptureTotals {
  std::uint64_t steps = 0;        // steps ended
  std::uint64_t steps_saved = 0;  // steps that queued a batch
  double step_seconds = 0.0;      // sum of the steps' wall times
  double capture_seconds = 0.0;   // sum of their capture times
};

// Pipeline counters, readable through the API and stored in the run.
struct PipelineCounters {
  std::uint64_t steps_captured = 0;     // steps with at least one record
  std::uint64_t records_written = 0;    // stats + scalar + raw records on disk
  std::uint64_t bytes_written = 0;      // bytes of closed segment files
  std::uint64_t raw_dropped = 0;        // raw snapshots dropped (memory cap)
  std::uint64_t raw_dropped_bytes = 0;
  std::uint64_t records_lost = 0;       // records lost to write errors (disk full...)
  std::uint64_t write_errors = 0;       // failed writes/flushes
  std::uint64_t stats_waits = 0;        // times end_step waited for queue space
  double stats_wait_seconds = 0.0;      // total time spent in those waits
  std::uint64_t queue_high_water = 0;   // most batches queued at once
  std::uint64_t queue_high_water_bytes = 0;
  std::uint64_t segments_written = 0;
  CaptureTotals capture;  // the session's, carried to storage with the counters
  // In-process rules: times EndStep waited for the rules thread to evaluate
  // the previous steps (the stop guarantee), and the time spent waiting.
  // Kept in memory only (not stored in the run).
  std::uint64_t rules_waits = 0;
  double rules_wait_seconds = 0.0;
};

}  // namespace tstat
