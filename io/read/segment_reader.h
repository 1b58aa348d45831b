// Reads one sealed segment file back into memory (everything but the raw
// snapshot bytes, which are read on demand: raw_dataset.h).
//
// ReadSegment verifies the seal (segment_seal.h) before HDF5 sees the file,
// then reads the attributes and every table, and checks the rows against each
// other (offsets inside their payload arrays, bins inside the histogram,
// modes valid, tensor ids declared in the segment's registry). Any failure is
// kCorruption naming the file (kNotSupported for a newer format_version,
// kIoError when the file cannot be read at all).
// Thread safety: takes the HDF5 lock itself; callable from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/format/segment_buffers.h"
#include "io/format/segment_header.h"
#include "io/format/stats_layout.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::io {

struct SegmentContents {
  SegmentHeader header;
  std::vector<TensorInfo> tensors;  // the full registry as of this segment
  SegmentBuffers tables;            // drops and raw_index included
  std::optional<PipelineCounters> counters;
  // Where its stats rows are (from the worker catalog; null when read from
  // the file or unknown).
  std::shared_ptr<const StatsLayout> stats_layout;
};

// With `reuse`, its vectors (emptied, their memory kept) become the tables
// read: a walk over a run's segments then touches no fresh pages.
Result<SegmentContents> ReadSegment(const std::string& path, SegmentBuffers* reuse = nullptr);
// The same, for a caller that holds the HDF5 lock (h5_lock.h) already.
Result<SegmentContents> ReadSegmentLocked(const std::string& path);

// What ReadSegmentMetadata remembers of the registry it decoded last: its
// datasets as stored (names, encoded types, rows), so that the next segment
// of the worker, which repeats the whole registry and usually the same one,
// is recognised by comparing bytes instead of being decoded again (1,000
// tensors: ~1 MB of fixed-width name rows per segment). One per worker.
struct RegistryMemo {
  std::vector<unsigned char> key;
  std::vector<TensorInfo> tensors;
  bool valid = false;
  std::uint64_t hits = 0;  // segments whose registry came from the memo
};

// All ReadSegment reads but the per-record tables (stats, histograms,
// per-channel stats, ...), which stay empty: what a Trial reads to open a
// run (the records are read when asked for, segment_cache.h). The same
// checks of what it reads. With a `memo`, an unchanged registry is taken
// from it (segments before format_version 3 are always decoded).
//
// Each read verifies the segment's seal (segment_seal.h) before HDF5 opens
// it, unless told the caller just did (`seal_verified`).
Result<SegmentContents> ReadSegmentMetadata(const std::string& path, RegistryMemo* memo = nullptr);

// The header and the stats table alone (no other table, not the registry):
// what a series of a stat reads. Its rows' tensor ids are checked with
// `known` (the registry read when the run was opened); `tensors` stays empty.
Result<SegmentContents> ReadSegmentStats(const std::string& path,
                                         const std::function<bool(std::uint32_t)>& known,
                                         bool seal_verified = false);

// What ReadSegment reads but the registry and the counters: the records
// of a segment whose metadata the caller read when it opened the run (the
// segment cache). Rows' tensor ids are checked with `known` (that
// registry); `tensors` stays empty. `reuse` as ReadSegment's.
// `tables` says what of the record tables is read.
struct RecordTablesRead {
  // false: exp_hist and exp_hist_counts are not read (stay empty).
  bool exponent_histograms = true;
  // false: the stats table is not read (stays empty) and its rows are not
  // checked: the caller reads them its own way (stats_chunk_reader.h);
  // stats_capture_index is read.
  bool stats = true;
  // true: the caller verified the seal just before (not checked again).
  bool seal_verified = false;
  // Set: the exponent histograms of this global step alone (exp_hist's rows
  // of the step, exp_hist_counts' range they point into, their offsets
  // into that range): a query of one step.
  std::optional<std::int64_t> exp_hist_step;
};
Result<SegmentContents> ReadSegmentRecords(const std::string& path,
                                           const std::function<bool(std::uint32_t)>& known,
                                           SegmentBuffers* reuse = nullptr,
                                           RecordTablesRead tables = {});

// The checks ReadSegment makes of the rows it read (modes, ids that `known`
// accepts, offsets inside their payload arrays, ...), for rows that came
// from elsewhere (the worker catalog). kCorruption naming `path`.
Status ValidateSegmentTables(const SegmentBuffers& b,
                             const std::function<bool(std::uint32_t)>& known,
                             const std::string& path);

// What the isolated child runs (isolated_read.h), with the HDF5 lock held:
// the seal (unless `seal_verified`: the parent checked it), then what
// ReadSegment reads except the per-record tables (stats, histograms,
// per-channel stats, ...) and raw snapshots, whose metadata is parsed
// instead -- each dataset opened, its type checked, its storage and chunk
// index walked -- without reading their data. Everything libhdf5 parses of
// the file to read it is parsed here; the chunks ReadSegment then reads are
// decoded by tstat (h5_chunk_read.h). With `records_only`: only what
// ReadSegmentRecords and ReadSegmentStats read (not the registry and
// counters a metadata read reads); without `stats_table` not the stats
// table either (a read that decodes its chunks itself from the catalog's
// layout, StatsChunkReader's, does not hand it to HDF5). The same errors
// as ReadSegment for what it reads.
Status WalkSegmentLocked(const std::string& path, RegistryMemo* memo = nullptr,
                         bool seal_verified = false, bool records_only = false,
                         bool stats_table = true);

}  // namespace tstat::io
