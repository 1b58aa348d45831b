// The worker catalog, RUN/worker-<rank>/catalog: after each segment is sealed
// and renamed into place, the writer appends one frame describing it -- what
// a reader needs to open the run (header, registry, steps, scalars, drops,
// raw index, counters) -- so that opening a run reads one small file per
// worker instead of parsing every segment with HDF5 and checking its whole
// CRC. The catalog only repeats what the segments hold: a reader uses a frame
// for a segment whose file exists with the frame's byte count, and reads the
// segment itself (the slow path) for any segment the catalog lacks; a frame
// that fails its CRC (a torn append) ends the usable catalog.
//
// Frame: "TSCF", uint32 payload length, uint32 CRC-32 of the payload, the
// payload (little-endian, docs/storage-format.md "Worker catalog").
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/format/segment_buffers.h"
#include "io/format/segment_header.h"
#include "io/format/stats_layout.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::io {

inline constexpr char kCatalogFileName[] = "catalog";
inline constexpr std::uint32_t kCatalogVersion = 3;
// A frame larger than this is refused (by the writer, which then leaves the
// segment out of the catalog, and by the reader, which stops there).
inline constexpr std::uint32_t kMaxCatalogFrameBytes = 64u << 20;
// The bytes of a frame besides its payload.
inline constexpr std::uint32_t kCatalogFrameHeaderBytes = 12;

// One segment's frame. `tensors` and `header.config_json` are stored only
// when they differ from the previous frame's (has_registry, has_config); a
// reader carries them over from the frame before.
struct CatalogEntry {
  std::uint64_t file_bytes = 0;  // of seg-<header.segment_index>.h5
  SegmentHeader header;
  bool has_config = true;
  bool has_registry = true;
  std::vector<TensorInfo> tensors;
  // steps, scalars, drops, raw_index and raw_shapes; the rest stays empty.
  SegmentBuffers tables;
  std::optional<PipelineCounters> counters;
  // Where the stats rows are (format_version 4, tables compressed).
  std::optional<StatsLayout> stats_layout;
};

// Appends the frame of `e` to `out`.
Status EncodeCatalogFrame(const CatalogEntry& e, std::string* out);

// The frames of data[0, size), decoded. Decoding stops at the first frame
// that is incomplete, fails its CRC or does not parse: `used` is the bytes
// before it and `problem` says why (empty when every byte was used). A
// caller reading a growing catalog calls again from `used` once more bytes
// are there. An entry without has_registry (has_config) has an empty
// `tensors` (config_json): the caller carries the previous entry's.
struct CatalogFrames {
  std::vector<CatalogEntry> entries;
  std::uint64_t used = 0;
  std::string problem;
  // The problem is only that the data ends inside a frame (being appended,
  // or cut short): more bytes may complete it.
  bool incomplete = false;
};
CatalogFrames DecodeCatalogFrames(const std::uint8_t* data, std::uint64_t size);

}  // namespace tstat::io
