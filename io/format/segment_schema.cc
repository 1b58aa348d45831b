// See segment_schema.h.
#include "io/format/segment_schema.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>

#include "io/h5/h5_type.h"

namespace tstat::io {

StoredStats ToStored(const TensorStats& s) {
  return StoredStats{s.count,         s.finite_count,  s.nan_count,   s.pos_inf_count,
                     s.neg_inf_count, s.zero_count,    s.neg_count,   s.subnormal_count,
                     s.band_lo_count, s.band_hi_count, s.small_count, s.min,
                     s.max,           s.mean,          s.m2,          s.l1,
                     s.amax};
}

TensorStats FromStored(const StoredStats& s) {
  TensorStats t;
  t.count = s.count;
  t.finite_count = s.finite_count;
  t.nan_count = s.nan_count;
  t.pos_inf_count = s.pos_inf_count;
  t.neg_inf_count = s.neg_inf_count;
  t.zero_count = s.zero_count;
  t.neg_count = s.neg_count;
  t.subnormal_count = s.subnormal_count;
  t.band_lo_count = s.band_lo_count;
  t.band_hi_count = s.band_hi_count;
  t.small_count = s.small_count;
  t.min = s.min;
  t.max = s.max;
  t.mean = s.mean;
  t.m2 = s.m2;
  t.l1 = s.l1;
  t.amax = s.amax;
  if (s.finite_count > 0) {
    const double n = static_cast<double>(s.finite_count);
    t.sum = s.mean * n;
    t.l2 = std::sqrt(s.m2 + n * s.mean * s.mean);
  } else {
    t.sum = 0.0;
    t.l2 = 0.0;
  }
  return t;
}

std::optional<std::uint64_t> ShapeBytes(const std::vector<std::int64_t>& shape,
                                        std::size_t element_bytes) {
  bool empty = false;  // a zero dimension: no bytes, whatever the others
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    empty = empty || d == 0;
  }
  if (empty) return 0;
  std::uint64_t bytes = element_bytes;
  for (std::int64_t d : shape) {
    const auto n = static_cast<std::uint64_t>(d);
    if (bytes > UINT64_MAX / n) return std::nullopt;
    bytes *= n;
  }
  return bytes;
}

hid_t RawStorageType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return H5T_IEEE_F32LE;
    case DType::kFloat64:
      return H5T_IEEE_F64LE;
    case DType::kFloat16:
    case DType::kBFloat16:
      return H5T_STD_U16LE;
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kUInt8:
      return H5T_STD_U8LE;
    case DType::kInt32:
      return H5T_STD_I32LE;
    case DType::kInt64:
      return H5T_STD_I64LE;
  }
  return H5T_STD_U8LE;
}

namespace {

template <class Row>
void AddStepKeys(CompoundBuilder& b) {
  b.Add("global_step", offsetof(Row, global_step), H5T_NATIVE_INT64)
      .Add("mode", offsetof(Row, mode), H5T_NATIVE_UINT8)
      .Add("mode_step", offsetof(Row, mode_step), H5T_NATIVE_INT64);
}

template <class Row>
void AddKeys(CompoundBuilder& b) {
  AddStepKeys<Row>(b);
  b.Add("tensor_id", offsetof(Row, tensor_id), H5T_NATIVE_UINT32);
}

void AddStats(CompoundBuilder& b, std::size_t base) {
#define TSTAT_IO_ADD(field, type) b.Add(#field, base + offsetof(StoredStats, field), type)
  TSTAT_IO_ADD(count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(finite_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(nan_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(pos_inf_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(neg_inf_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(zero_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(neg_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(subnormal_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(band_lo_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(band_hi_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(small_count, H5T_NATIVE_UINT64);
  TSTAT_IO_ADD(min, H5T_NATIVE_DOUBLE);
  TSTAT_IO_ADD(max, H5T_NATIVE_DOUBLE);
  TSTAT_IO_ADD(mean, H5T_NATIVE_DOUBLE);
  TSTAT_IO_ADD(m2, H5T_NATIVE_DOUBLE);
  TSTAT_IO_ADD(l1, H5T_NATIVE_DOUBLE);
  TSTAT_IO_ADD(amax, H5T_NATIVE_DOUBLE);
#undef TSTAT_IO_ADD
}

}  // namespace

#define TSTAT_IO_MEMBER(Row, field, type) Add(#field, offsetof(Row, field), type)

Result<H5Type> StepRowType() {
  CompoundBuilder b(sizeof(StepRow));
  AddStepKeys<StepRow>(b);
  b.TSTAT_IO_MEMBER(StepRow, wall_time, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(StepRow, step_seconds, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(StepRow, capture_seconds, H5T_NATIVE_DOUBLE);
  return b.Build();
}

Result<H5Type> StatsRowType() {
  CompoundBuilder b(sizeof(StatsRow));
  AddKeys<StatsRow>(b);
  b.TSTAT_IO_MEMBER(StatsRow, has_stats, H5T_NATIVE_UINT8);
  AddStats(b, offsetof(StatsRow, s));
  return b.Build();
}

Result<H5Type> ExpHistRowType() {
  CompoundBuilder b(sizeof(ExpHistRow));
  AddKeys<ExpHistRow>(b);
  b.TSTAT_IO_MEMBER(ExpHistRow, first_bin, H5T_NATIVE_UINT16)
      .TSTAT_IO_MEMBER(ExpHistRow, num_bins, H5T_NATIVE_UINT16)
      .TSTAT_IO_MEMBER(ExpHistRow, offset, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> LinearHistRowType() {
  CompoundBuilder b(sizeof(LinearHistRow));
  AddKeys<LinearHistRow>(b);
  b.TSTAT_IO_MEMBER(LinearHistRow, lo, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(LinearHistRow, hi, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(LinearHistRow, below, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(LinearHistRow, above, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(LinearHistRow, num_bins, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(LinearHistRow, offset, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> ChannelRowType() {
  CompoundBuilder b(sizeof(ChannelRow));
  AddKeys<ChannelRow>(b);
  b.TSTAT_IO_MEMBER(ChannelRow, axis, H5T_NATIVE_INT32)
      .TSTAT_IO_MEMBER(ChannelRow, channel, H5T_NATIVE_UINT32);
  AddStats(b, offsetof(ChannelRow, s));
  return b.Build();
}

Result<H5Type> LabelRowType() {
  CompoundBuilder b(sizeof(LabelRow));
  AddKeys<LabelRow>(b);
  b.TSTAT_IO_MEMBER(LabelRow, out_of_range, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(LabelRow, num_classes, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(LabelRow, offset, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> SampleRowType() {
  CompoundBuilder b(sizeof(SampleRow));
  AddKeys<SampleRow>(b);
  b.TSTAT_IO_MEMBER(SampleRow, num_values, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(SampleRow, offset, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> DeltaRowType() {
  CompoundBuilder b(sizeof(DeltaRow));
  AddKeys<DeltaRow>(b);
  b.TSTAT_IO_MEMBER(DeltaRow, count, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(DeltaRow, changed_count, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(DeltaRow, nonfinite_pairs, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(DeltaRow, l1, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(DeltaRow, l2, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(DeltaRow, amax, H5T_NATIVE_DOUBLE);
  return b.Build();
}

Result<H5Type> ConfusionRowType() {
  CompoundBuilder b(sizeof(ConfusionRow));
  AddKeys<ConfusionRow>(b);
  b.TSTAT_IO_MEMBER(ConfusionRow, classes, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(ConfusionRow, invalid, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(ConfusionRow, offset, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> ValueCountsRowType() {
  CompoundBuilder b(sizeof(ValueCountsRow));
  AddKeys<ValueCountsRow>(b);
  b.TSTAT_IO_MEMBER(ValueCountsRow, num_values, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(ValueCountsRow, offset, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> ScalarRowType() {
  CompoundBuilder b(sizeof(ScalarRow));
  AddStepKeys<ScalarRow>(b);
  b.TSTAT_IO_MEMBER(ScalarRow, scalar_id, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(ScalarRow, value, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(ScalarRow, wall_time, H5T_NATIVE_DOUBLE);
  return b.Build();
}

Result<H5Type> HeaderRowType() {
  TSTAT_ASSIGN_OR_RETURN(H5Type format, FixedUtf8StringType(kHeaderFormatChars));
  TSTAT_ASSIGN_OR_RETURN(H5Type host, FixedUtf8StringType(kHeaderHostChars));
  TSTAT_ASSIGN_OR_RETURN(H5Type version, FixedUtf8StringType(kHeaderVersionChars));
  CompoundBuilder b(sizeof(HeaderRow));
  b.TSTAT_IO_MEMBER(HeaderRow, format, format.get())
      .TSTAT_IO_MEMBER(HeaderRow, format_version, H5T_NATIVE_INT64)
      .TSTAT_IO_MEMBER(HeaderRow, rank, H5T_NATIVE_INT64)
      .TSTAT_IO_MEMBER(HeaderRow, world_size, H5T_NATIVE_INT64)
      .TSTAT_IO_MEMBER(HeaderRow, host, host.get())
      .TSTAT_IO_MEMBER(HeaderRow, segment_index, H5T_NATIVE_INT64)
      .TSTAT_IO_MEMBER(HeaderRow, tstat_version, version.get())
      .TSTAT_IO_MEMBER(HeaderRow, created_unix_time, H5T_NATIVE_DOUBLE);
  return b.Build();
}

Result<H5Type> DropRowType() {
  TSTAT_ASSIGN_OR_RETURN(H5Type kind, FixedUtf8StringType(kDropKindChars));
  TSTAT_ASSIGN_OR_RETURN(H5Type reason, FixedUtf8StringType(kDropReasonChars));
  CompoundBuilder b(sizeof(DropRow));
  AddKeys<DropRow>(b);
  b.TSTAT_IO_MEMBER(DropRow, kind, kind.get())
      .TSTAT_IO_MEMBER(DropRow, reason, reason.get())
      .TSTAT_IO_MEMBER(DropRow, bytes, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> CountersRowType() {
  CompoundBuilder b(sizeof(CountersRow));
  b.TSTAT_IO_MEMBER(CountersRow, steps_captured, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, records_written, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, bytes_written, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, raw_dropped, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, raw_dropped_bytes, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, records_lost, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, write_errors, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, stats_waits, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, stats_wait_seconds, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(CountersRow, queue_high_water, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, queue_high_water_bytes, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, segments_written, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, capture_steps, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, capture_steps_saved, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(CountersRow, capture_step_seconds, H5T_NATIVE_DOUBLE)
      .TSTAT_IO_MEMBER(CountersRow, capture_seconds, H5T_NATIVE_DOUBLE);
  return b.Build();
}

std::string RawDatasetName(const RawIndexRow& row) {
  return std::string(row.dataset, strnlen(row.dataset, kRawDatasetChars));
}

std::vector<std::int64_t> RawShape(const RawIndexRow& row,
                                   const std::vector<std::int64_t>& raw_shapes) {
  const auto first = raw_shapes.begin() + static_cast<std::ptrdiff_t>(row.shape_offset);
  return std::vector<std::int64_t>(first, first + row.rank);
}

void SetFixedChars(const std::string& value, char* out, std::size_t n) {
  std::memset(out, 0, n);
  if (value.size() <= n) {
    std::memcpy(out, value.data(), value.size());
    return;
  }
  constexpr char kCut[] = "...";
  std::size_t keep = n - (sizeof(kCut) - 1);
  // Back up to the first byte of a UTF-8 character.
  while (keep > 0 && (static_cast<unsigned char>(value[keep]) & 0xC0) == 0x80) --keep;
  std::memcpy(out, value.data(), keep);
  std::memcpy(out + keep, kCut, sizeof(kCut) - 1);
}

std::string FixedChars(const char* in, std::size_t n) { return std::string(in, strnlen(in, n)); }

void SetDTypeChars(DType t, char (&out)[kDTypeChars]) {
  std::memset(out, 0, kDTypeChars);
  std::strncpy(out, DTypeName(t), kDTypeChars);
}

bool ParseDTypeChars(const char (&in)[kDTypeChars], DType* out) {
  return ParseDType(std::string(in, strnlen(in, kDTypeChars)), out);
}

Result<H5Type> DTypeStringType() { return FixedStringType(kDTypeChars); }

Result<H5Type> TensorRowType() {
  TSTAT_ASSIGN_OR_RETURN(H5Type str, FixedUtf8StringType(kTensorNameChars));
  TSTAT_ASSIGN_OR_RETURN(H5Type dtype, DTypeStringType());
  CompoundBuilder b(sizeof(TensorRow));
  b.TSTAT_IO_MEMBER(TensorRow, id, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(TensorRow, name, str.get())
      .TSTAT_IO_MEMBER(TensorRow, kind, H5T_NATIVE_UINT8)
      .TSTAT_IO_MEMBER(TensorRow, dtype, dtype.get())
      .TSTAT_IO_MEMBER(TensorRow, space, H5T_NATIVE_UINT8)
      .TSTAT_IO_MEMBER(TensorRow, rank, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(TensorRow, shape_offset, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> StatsTensorRowType() {
  CompoundBuilder b(sizeof(StatsTensorRow));
  b.TSTAT_IO_MEMBER(StatsTensorRow, tensor_id, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(StatsTensorRow, first_row, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(StatsTensorRow, row_count, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> TensorCollectionRowType() {
  CompoundBuilder b(sizeof(TensorCollectionRow));
  b.TSTAT_IO_MEMBER(TensorCollectionRow, tensor_id, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(TensorCollectionRow, collection, H5T_NATIVE_UINT32);
  return b.Build();
}

Result<H5Type> RawIndexRowType() {
  TSTAT_ASSIGN_OR_RETURN(H5Type dataset, FixedStringType(kRawDatasetChars));
  TSTAT_ASSIGN_OR_RETURN(H5Type dtype, DTypeStringType());
  CompoundBuilder b(sizeof(RawIndexRow));
  AddKeys<RawIndexRow>(b);
  b.TSTAT_IO_MEMBER(RawIndexRow, dataset, dataset.get())
      .TSTAT_IO_MEMBER(RawIndexRow, dtype, dtype.get())
      .TSTAT_IO_MEMBER(RawIndexRow, rank, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(RawIndexRow, shape_offset, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(RawIndexRow, byte_offset, H5T_NATIVE_UINT64)
      .TSTAT_IO_MEMBER(RawIndexRow, byte_count, H5T_NATIVE_UINT64);
  return b.Build();
}

#undef TSTAT_IO_MEMBER

}  // namespace tstat::io
