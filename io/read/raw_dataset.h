// ReadRawDataset: the bytes of one raw snapshot of a segment, read when a
// query asks for them (the segment's metadata says where they are).
// Thread safety: takes the HDF5 lock itself; callable from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::io {

// Reads raw snapshot `dataset` of the segment at `path`: its bytes, checked
// against `dtype` and the element count of `shape` (empty shape: any). For
// kRawPackedDataset, bytes [byte_offset, byte_offset + byte_count) of it (the
// row's shape and dtype were checked against byte_count by ReadSegment).
Result<std::vector<std::uint8_t>> ReadRawDataset(const std::string& path,
                                                 const std::string& dataset, DType dtype,
                                                 const std::vector<std::int64_t>& shape,
                                                 std::uint64_t byte_offset = 0,
                                                 std::uint64_t byte_count = 0);

}  // namespace tstat::io
