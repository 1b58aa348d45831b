// The tables of a segment file: one C++ row struct per table and its HDF5
// compound type, shared by the writer and the reader (docs/storage-format.md documents the
// same tables for h5py users; the member names below are the names on disk).
//
// Keys: every per-step row starts with global_step, mode (1 TRAIN, 2 EVAL,
// 3 PREDICT, 4 GLOBAL), mode_step and, where it applies, tensor_id. Tables
// with variable-size payloads (histogram counts, label counts, samples) keep
// the payload in a flat 1-D dataset and store (offset, length) in the row.
// The row structs are plain data; the type builders need the HDF5 lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/format/stored_string_limits.h"
#include "io/h5/h5_handle.h"
#include "tstat/dtype.h"
#include "tstat/stats.h"
#include "tstat/status.h"

namespace tstat::io {

inline constexpr char kFormatName[] = "tstat-run";
// Version 3 holds no variable-length data: every string is fixed-length
// (attributes, config, names, collections, drop reasons). Versions 1 and 2
// stored those as variable-length strings (version 1 also raw_index's
// `dataset` and `shape`), which libhdf5 reads from its global heap without
// validating a crafted file: the reader loads them only when asked
// (segment_legacy_reader.h).
// Version 4 groups the stats rows of a segment by tensor (stats_tensors
// gives each tensor's row range; stats_capture_index the capture order
// within a step), so that a series reads one small part of each segment.
inline constexpr std::int64_t kFormatVersion = 4;
inline constexpr std::int64_t kOldestReadableFormatVersion = 1;
inline constexpr std::int64_t kNewestLegacyFormatVersion = 2;

// Whether `mode` is a step key's mode as stored: 1 TRAIN, 2 EVAL, 3 PREDICT,
// 4 GLOBAL (the writer's check of a batch, the reader's of every row).
inline bool IsStoredMode(std::uint8_t mode) { return mode >= 1 && mode <= 4; }

// Dataset names (all at the file root, raw snapshots under "raw/").
inline constexpr char kConfigDataset[] = "config";
inline constexpr char kTensorsTable[] = "tensors";
inline constexpr char kTensorShapes[] = "tensor_shapes";
inline constexpr char kCollections[] = "collections";
inline constexpr char kTensorCollectionsTable[] = "tensor_collections";
inline constexpr char kStepsTable[] = "steps";
inline constexpr char kStatsTable[] = "stats";
// Version 4: the stats rows' order within a step (uint32 per stats row),
// and each tensor's row range (StatsTensorRow).
inline constexpr char kStatsCaptureIndex[] = "stats_capture_index";
inline constexpr char kStatsTensorsTable[] = "stats_tensors";
inline constexpr char kExpHistTable[] = "exp_hist";
inline constexpr char kExpHistCounts[] = "exp_hist_counts";
inline constexpr char kLinearHistTable[] = "linear_hist";
inline constexpr char kLinearHistCounts[] = "linear_hist_counts";
inline constexpr char kChannelsTable[] = "channels";
inline constexpr char kLabelsTable[] = "labels";
inline constexpr char kLabelCounts[] = "label_counts";
inline constexpr char kSamplesTable[] = "samples";
inline constexpr char kSamplePositions[] = "sample_positions";
inline constexpr char kSampleValues[] = "sample_values";
inline constexpr char kDeltaTable[] = "delta";
inline constexpr char kConfusionTable[] = "confusion";
inline constexpr char kConfusionCounts[] = "confusion_counts";
inline constexpr char kValueCountsTable[] = "value_counts";
inline constexpr char kCountedValues[] = "value_counts_values";
inline constexpr char kCountedCounts[] = "value_counts_counts";
inline constexpr char kScalarsTable[] = "scalars";
inline constexpr char kDropsTable[] = "drops";
inline constexpr char kCountersTable[] = "counters";
// One row: what the root attributes say, for tstat's reader (h5py and h5dump
// users may read either). The reader never opens an attribute of a version 3
// segment: libhdf5 1.10.8 decodes a crafted attribute message without
// checking its name's length against the message.
inline constexpr char kHeaderTable[] = "header";
inline constexpr char kRawGroup[] = "raw";
inline constexpr char kRawIndexTable[] = "raw_index";
inline constexpr char kRawShapes[] = "raw_shapes";
// Snapshots smaller than kRawPackBelowBytes share this 1-D uint8 dataset (one
// HDF5 object each cost ~60 us to create and to open, the time to write
// ~60-100 KB: at 400 KB per snapshot the writer ran at ~1 GB/s, packed at
// ~1.6): raw_index gives each one's byte range in it.
inline constexpr char kRawPackedDataset[] = "raw/packed";
inline constexpr std::size_t kRawPackBelowBytes = 1 << 20;

inline constexpr std::size_t kHeaderFormatChars = 16;
inline constexpr std::size_t kHeaderHostChars = 256;
inline constexpr std::size_t kHeaderVersionChars = 64;
struct HeaderRow {
  char format[kHeaderFormatChars];  // kFormatName
  std::int64_t format_version;
  std::int64_t rank, world_size;
  char host[kHeaderHostChars];
  std::int64_t segment_index;
  char tstat_version[kHeaderVersionChars];
  double created_unix_time;
};

// The stored TensorStats fields (sum, l2 and variance are derived on read).
struct StoredStats {
  std::uint64_t count, finite_count, nan_count, pos_inf_count, neg_inf_count, zero_count, neg_count,
      subnormal_count, band_lo_count, band_hi_count, small_count;
  double min, max, mean, m2, l1, amax;
};
StoredStats ToStored(const TensorStats& s);
// sum = mean * n, l2 = sqrt(m2 + n * mean^2) with n = finite_count (both 0
// when there is no finite value).
TensorStats FromStored(const StoredStats& s);

struct StepRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  double wall_time, step_seconds, capture_seconds;
};
struct StatsRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  std::uint8_t has_stats;  // 0: the record holds only label counts
  StoredStats s;
};
// One per tensor with stats rows in the segment, ascending tensor_id: its
// rows are stats[first_row : first_row + row_count], in step order.
struct StatsTensorRow {
  std::uint32_t tensor_id;
  std::uint64_t first_row;
  std::uint64_t row_count;
};
struct ExpHistRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  std::uint16_t first_bin, num_bins;  // bins [first_bin, first_bin + num_bins)
  std::uint64_t offset;               // into exp_hist_counts
};
struct LinearHistRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  double lo, hi;
  std::uint64_t below, above;
  std::uint32_t num_bins;
  std::uint64_t offset;  // into linear_hist_counts
};
struct ChannelRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  std::int32_t axis;
  std::uint32_t channel;
  StoredStats s;
};
struct LabelRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  std::uint64_t out_of_range;
  std::uint32_t num_classes;
  std::uint64_t offset;  // into label_counts
};
struct SampleRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  std::uint64_t num_values;
  std::uint64_t offset;  // into sample_positions and sample_values
};
struct DeltaRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  std::uint64_t count, changed_count, nonfinite_pairs;
  double l1, l2, amax;
};
struct ConfusionRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  std::uint32_t classes;
  std::uint64_t invalid;
  std::uint64_t offset;  // classes*classes counts (row = label) in confusion_counts
};
struct ValueCountsRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  std::uint32_t num_values;
  std::uint64_t offset;  // into value_counts_values and value_counts_counts
};
struct ScalarRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t scalar_id;
  double value, wall_time;
};
struct DropRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  char kind[kDropKindChars];
  char reason[kDropReasonChars];
  std::uint64_t bytes;
};
struct CountersRow {
  std::uint64_t steps_captured, records_written, bytes_written, raw_dropped, raw_dropped_bytes,
      records_lost, write_errors, stats_waits;
  double stats_wait_seconds;
  std::uint64_t queue_high_water, queue_high_water_bytes, segments_written;
  // CaptureTotals (PipelineCounters::capture): steps, steps_saved, step_seconds, capture_seconds.
  std::uint64_t capture_steps, capture_steps_saved;
  double capture_step_seconds, capture_seconds;
};
// dtype names ("f32", "bf16", "f8e4m3", ...) as fixed 8-byte NUL-padded strings.
inline constexpr std::size_t kDTypeChars = 8;
struct TensorRow {
  std::uint32_t id;
  char name[kTensorNameChars];  // UTF-8, verbatim, NUL-padded
  std::uint8_t kind;            // 0 tensor, 1 scalar
  char dtype[kDTypeChars];
  std::uint8_t space;  // 0 host, 1 cuda
  std::uint32_t rank;
  std::uint64_t shape_offset;  // shape = tensor_shapes[shape_offset : shape_offset + rank]
};
struct TensorCollectionRow {
  std::uint32_t tensor_id;
  std::uint32_t collection;  // index into the "collections" string list
};
// raw_index's dataset names ("raw/packed", "raw/000123") as fixed NUL-padded
// strings: "raw/" and the 20 digits of any uint64 index fit.
inline constexpr std::size_t kRawDatasetChars = 24;
// Fixed-size rows (format_version 2): a row with variable-length members cost
// HDF5 a global-heap object per member, a large part of the writer's time
// with many small snapshots, and kept the table from being deflated.
struct RawIndexRow {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  char dataset[kRawDatasetChars];  // "raw/000000", or kRawPackedDataset
  char dtype[kDTypeChars];
  std::uint32_t rank;
  std::uint64_t shape_offset;  // shape = raw_shapes[shape_offset : shape_offset + rank]
  // The snapshot's bytes within `dataset` when it is kRawPackedDataset (both 0
  // otherwise).
  std::uint64_t byte_offset;
  std::uint64_t byte_count;
};
// The HDF5 type a raw snapshot of `t` is stored as (little-endian, the bytes
// as in memory): f32/f64 as IEEE floats, i32/i64/u8 as integers, f16/bf16 as
// uint16 and the fp8 types as uint8 (their dataset's "dtype" attribute names
// the real type).
hid_t RawStorageType(DType t);

// The bytes of a raw snapshot of `shape` (1 element for an empty shape) with
// `element_bytes` per element; nullopt when a dimension is negative or the
// product overflows 64 bits, so that no shape can wrap around to a plausible
// size. Shared by the writer's validation and the reader's checks.
std::optional<std::uint64_t> ShapeBytes(const std::vector<std::int64_t>& shape,
                                        std::size_t element_bytes);

// A raw_index row's dataset name (NUL-padded, unterminated when full) and
// shape (the caller checked shape_offset + rank against raw_shapes).
std::string RawDatasetName(const RawIndexRow& row);
std::vector<std::int64_t> RawShape(const RawIndexRow& row,
                                   const std::vector<std::int64_t>& raw_shapes);

// Fixed string fields: `value` NUL-padded into `out` (cut at a UTF-8
// character boundary, ending in "...", when longer than `n`), and back.
void SetFixedChars(const std::string& value, char* out, std::size_t n);
std::string FixedChars(const char* in, std::size_t n);
template <std::size_t N>
void SetFixedChars(const std::string& value, char (&out)[N]) {
  SetFixedChars(value, out, N);
}
template <std::size_t N>
std::string FixedChars(const char (&in)[N]) {
  return FixedChars(in, N);
}

// Fills a fixed dtype string field.
void SetDTypeChars(DType t, char (&out)[kDTypeChars]);
// Parses one (NUL-padded, possibly unterminated); false if unknown.
bool ParseDTypeChars(const char (&in)[kDTypeChars], DType* out);

// Memory types of the rows above (the file type is their packed copy).
Result<H5Type> HeaderRowType();  // on disk, the strings as wide as their values
Result<H5Type> StepRowType();
Result<H5Type> StatsRowType();
Result<H5Type> StatsTensorRowType();
Result<H5Type> ExpHistRowType();
Result<H5Type> LinearHistRowType();
Result<H5Type> ChannelRowType();
Result<H5Type> LabelRowType();
Result<H5Type> SampleRowType();
Result<H5Type> DeltaRowType();
Result<H5Type> ConfusionRowType();
Result<H5Type> ValueCountsRowType();
Result<H5Type> ScalarRowType();
Result<H5Type> DropRowType();  // memory type; on disk, kind and reason are
                               // as wide as the longest of the segment
Result<H5Type> CountersRowType();
Result<H5Type> TensorRowType();  // on disk, name is as wide as the longest
Result<H5Type> TensorCollectionRowType();
Result<H5Type> DTypeStringType();  // the fixed 8-byte dtype string
Result<H5Type> RawIndexRowType();

}  // namespace tstat::io
