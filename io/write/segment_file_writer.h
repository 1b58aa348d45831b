// Writes the contents of one segment into an open HDF5 file: root attributes,
// config, the tensor registry, every non-empty table, and raw snapshots.
//
// docs/storage-format.md is the specification of what these functions produce. Callers
// hold the HDF5 lock (h5_lock.h). Errors name the file and the dataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/format/segment_header.h"
#include "io/h5/h5_handle.h"
#include "io/write/segment_rows.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::io {

// Writes attributes, config, tensors (the full `registry`), the buffered
// tables, the rest of the streamed ones (Finish) and `counters` into `file`.
// Compressed tables of fixed-size rows are deflated by `streamed->deflater`.
Status WriteSegmentTables(hid_t file, const SegmentHeader& header,
                          const std::vector<TensorInfo>& registry, const SegmentBuffers& buffers,
                          StreamedRows* streamed, const PipelineCounters& counters,
                          int compression_level, const std::string& path);

// Writes `raw` as dataset raw/<index:06d> (creating the group "raw" first if
// needed) and returns the dataset's path in the file. The snapshot must be
// valid (ValidateRawSnapshot).
Result<std::string> WriteRawSnapshot(hid_t file, std::uint64_t index, const RawSnapshot& raw,
                                     int compression_level, const std::string& path);

// kInvalidArgument unless the bytes hold a whole number of elements matching
// the shape (an empty shape: any element count, stored 1-D).
Status ValidateRawSnapshot(const RawSnapshot& raw);

// Creates the group "raw" unless the file has it.
Status EnsureRawGroup(hid_t file, const std::string& path);

// Writes a segment's packed small snapshots as kRawPackedDataset, one
// fixed-size dataset (nothing when `bytes` is empty), at raw compression
// `level`: for segments whose packed bytes fit in one chunk
// (packed_raw_dataset.h writes the others as they fill).
Status WritePackedRawSnapshots(hid_t file, const std::vector<std::uint8_t>& bytes, int level,
                               const std::string& path);

}  // namespace tstat::io
