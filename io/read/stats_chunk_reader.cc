// See stats_chunk_reader.h.
#include "io/read/stats_chunk_reader.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "io/codec/chunk_deflate.h"
#include "io/h5/h5_lock.h"
#include "io/h5/h5_row_copy.h"
#include "io/h5/h5_type.h"
#include "io/h5/posix_file.h"
#include "io/read/step_major_order.h"

namespace tstat::io {
namespace {

// Closes a reader's file when its read ends, however it ends.
struct CloseWhenDone {
  UniqueFd* fd;
  ~CloseWhenDone() { *fd = UniqueFd(); }
};

}  // namespace

Result<std::unique_ptr<StatsChunkReader>> StatsChunkReader::Make() {
  std::optional<RowCopyPlan> plan;
  std::size_t row_bytes = 0;
  {
    H5Lock lock;
    TSTAT_ASSIGN_OR_RETURN(H5Type mem_type, StatsRowType());
    TSTAT_ASSIGN_OR_RETURN(H5Type stored, PackedCopy(mem_type.get()));
    row_bytes = H5Tget_size(stored.get());
    plan = RowCopyPlan::Build(stored.get(), mem_type.get());
  }
  if (!plan) return Status::Internal("stats rows cannot be read by copying bytes");
  if (plan->widens()) return Status::Internal("stats rows are not copied by runs");
  Runs runs;
  // StatsRow's members a PlacedStatsRow keeps, and where it keeps them.
  struct Member {
    std::size_t row, placed, bytes;
  };
  const Member kept[] = {{offsetof(StatsRow, tensor_id), offsetof(PlacedStatsRow, tensor_id), 4},
                         {offsetof(StatsRow, has_stats), offsetof(PlacedStatsRow, has_stats), 1},
                         {offsetof(StatsRow, s), offsetof(PlacedStatsRow, s), sizeof(StoredStats)}};
  constexpr std::size_t kKeyBytes = offsetof(StatsRow, s);  // the members before the stats
  for (const RowCopyPlan::Run& r : plan->runs()) {
    runs.all.push_back(ByteRun{r.src, r.dst, r.bytes});
    if (r.dst < kKeyBytes) {
      runs.keys.push_back(ByteRun{r.src, r.dst, std::min(r.bytes, kKeyBytes - r.dst)});
    }
    for (const Member& m : kept) {  // the run's bytes inside the member
      const std::size_t begin = std::max(r.dst, m.row);
      const std::size_t end = std::min(r.dst + r.bytes, m.row + m.bytes);
      if (begin < end) {
        runs.placed.push_back(
            ByteRun{r.src + (begin - r.dst), m.placed + (begin - m.row), end - begin});
      }
    }
  }
  libdeflate_decompressor* inflater = libdeflate_alloc_decompressor();
  if (inflater == nullptr) return Status::ResourceExhausted("no decompressor");
  return std::unique_ptr<StatsChunkReader>(
      new StatsChunkReader(std::move(runs), row_bytes, inflater));
}

StatsChunkReader::~StatsChunkReader() { libdeflate_free_decompressor(inflater_); }

Status StatsChunkReader::CheckRowBytes(const std::string& path, const StatsLayout& layout) const {
  if (layout.row_bytes == row_bytes_) return Status::OK();
  return Status::Corruption(path + ": stats rows of " + std::to_string(layout.row_bytes) +
                            " bytes in the catalog, not " + std::to_string(row_bytes_));
}

Result<UniqueFd> StatsChunkReader::OpenSegment(const std::string& path, std::uint64_t file_bytes) {
  std::uint64_t size = 0;
  Result<UniqueFd> opened = OpenRegularFile(path, &size);
  if (!opened.ok()) {
    // Not a regular file any more: not the file the catalog describes.
    if (opened.status().code() == StatusCode::kInvalidArgument) {
      return Status::Corruption(opened.status().message());
    }
    return opened.status();
  }
  if (size != file_bytes) {
    return Status::Corruption(path + ": not the file of " + std::to_string(file_bytes) +
                              " bytes the worker catalog describes");
  }
  return opened;
}

Status StatsChunkReader::OpenSegmentFd(const std::string& path, std::uint64_t file_bytes) {
  TSTAT_ASSIGN_OR_RETURN(fd_, OpenSegment(path, file_bytes));
  return Status::OK();
}

Status StatsChunkReader::DecodeChunk(int fd, const std::string& path, const StatsLayout& layout,
                                     std::size_t k, const std::vector<ByteRun>& runs) {
  TSTAT_RETURN_IF_ERROR(InflateChunk(fd, path, layout, k));
  // The planes straight into rows (no zeroing: runs_.all covers every
  // member, the layout's rows being the full stored row; with runs_.keys
  // only the keys are read).
  chunk_rows_.resize(layout.chunk_rows);
  UnshuffleRuns(inflated_.data(), layout.chunk_rows, runs.data(), runs.size(), sizeof(StatsRow),
                reinterpret_cast<std::uint8_t*>(chunk_rows_.data()));
  return Status::OK();
}

Status StatsChunkReader::InflateChunk(int fd, const std::string& path, const StatsLayout& layout,
                                      std::size_t k) {
  auto bad = [&](const std::string& what) { return Status::Corruption(path + ": stats " + what); };
  const StatsChunk& c = layout.chunks[k];
  const std::string which = "chunk " + std::to_string(k);
  const std::size_t chunk_bytes = std::size_t{layout.chunk_rows} * row_bytes_;
  stored_.resize(c.stored_bytes);
  TSTAT_ASSIGN_OR_RETURN(std::size_t read,
                         PreadUpTo(fd, stored_.data(), stored_.size(), c.offset, path));
  if (read != stored_.size()) return bad(which + " past the end of the file");
  if (static_cast<std::uint32_t>(libdeflate_crc32(0, stored_.data(), stored_.size())) != c.crc32) {
    return bad(which + " fails its CRC (damaged since it was written)");
  }
  // A zlib stream: a 2-byte header (deflate, a multiple of 31, no preset
  // dictionary), the deflate data, an Adler-32 of the output. The CRC-32 of
  // the stored bytes checked above covers all of it, so the inflated bytes
  // are not summed again (~5% of inflating them).
  const std::size_t stored = stored_.size();
  if (stored < 6 || (stored_[0] & 0x0F) != 8 || (stored_[0] >> 4) > 7 ||
      (stored_[0] * 256u + stored_[1]) % 31 != 0 || (stored_[1] & 0x20) != 0) {
    return bad(which + " is not a zlib stream");
  }
  inflated_.resize(chunk_bytes);
  std::size_t consumed = 0, produced = 0;
  if (libdeflate_deflate_decompress_ex(inflater_, stored_.data() + 2, stored - 6, inflated_.data(),
                                       chunk_bytes, &consumed, &produced) != LIBDEFLATE_SUCCESS ||
      produced != chunk_bytes || consumed != stored - 6) {
    return bad(which + " does not inflate to its " + std::to_string(chunk_bytes) + " bytes");
  }
  return Status::OK();
}

Status StatsChunkReader::ReadTensorRows(const std::string& path, std::uint64_t file_bytes,
                                        const StatsLayout& layout, std::uint32_t id,
                                        std::vector<StatsRow>* out) {
  // The last range that starts at or before `id`.
  auto range =
      std::upper_bound(layout.tensors.begin(), layout.tensors.end(), id,
                       [](std::uint32_t v, const StatsTensorRange& t) { return v < t.tensor_id; });
  if (range == layout.tensors.begin()) return Status::OK();
  --range;
  if (id - range->tensor_id >= range->count || range->rows == 0) return Status::OK();
  auto bad = [&](const std::string& what) { return Status::Corruption(path + ": stats " + what); };
  TSTAT_RETURN_IF_ERROR(CheckRowBytes(path, layout));
  // The catalog's checks (segment_catalog.cc) hold: chunks tile the rows and
  // lie in the file, the range lies in the rows.
  TSTAT_ASSIGN_OR_RETURN(const UniqueFd fd, OpenSegment(path, file_bytes));
  const std::uint64_t first = range->first_row + std::uint64_t{id - range->tensor_id} * range->rows;
  const std::uint64_t end = first + range->rows;
  const std::size_t before = out->size();
  for (std::uint64_t k = first / layout.chunk_rows; k * layout.chunk_rows < end; ++k) {
    TSTAT_RETURN_IF_ERROR(
        DecodeChunk(fd.get(), path, layout, static_cast<std::size_t>(k), runs_.all));
    const std::uint64_t chunk_first = k * layout.chunk_rows;
    const std::uint64_t a = std::max(first, chunk_first);
    const std::uint64_t b = std::min(end, chunk_first + layout.chunk_rows);
    // Grown a chunk at a time: the memory follows the rows decoded, not what
    // a (crafted) range claims.
    const auto from = chunk_rows_.begin() + static_cast<std::ptrdiff_t>(a - chunk_first);
    out->insert(out->end(), from, from + static_cast<std::ptrdiff_t>(b - a));
  }
  for (std::size_t i = before; i < out->size(); ++i) {
    const StatsRow& r = (*out)[i];
    if (r.tensor_id != id || !IsStoredMode(r.mode)) {
      return bad("row of tensor " + std::to_string(r.tensor_id) + ", mode " +
                 std::to_string(r.mode) + " in the range of tensor " + std::to_string(id));
    }
  }
  return Status::OK();
}

std::uint64_t StatsChunkReader::WriterTensors(
    const StatsLayout& layout, const std::vector<StepRow>& steps,
    const std::vector<std::uint32_t>& capture_index) const {
  const std::uint64_t n = layout.rows;
  if (capture_index.size() != n || steps.empty() || !StepsAscend(steps)) return 0;
  // What is allocated follows from the rows, and the rows from the stored
  // chunks: a writer's chunks follow one another in the file (their bytes
  // sum to at most the file's) and each inflates at most 1032-fold, as
  // deflate can. A layout that claims more is left to the general way,
  // whose reads are bounded by what the file stores.
  const std::uint64_t chunk_bytes = std::uint64_t{layout.chunk_rows} * row_bytes_;
  std::uint64_t next_offset = 0;
  for (const StatsChunk& c : layout.chunks) {
    if (c.offset < next_offset || chunk_bytes > 1032 * std::uint64_t{c.stored_bytes} + 64) {
      return 0;
    }
    next_offset = c.offset + c.stored_bytes;
  }
  std::uint64_t tensors = 0;
  for (const StatsTensorRange& r : layout.tensors) tensors += r.count;
  // A place per (step, position in the step): as many as rows when every
  // tensor is saved at every step of the segment; far more (tensors saved
  // at different steps) is left to the general way.
  if (tensors * steps.size() > 2 * n + 1024) return 0;
  return tensors;
}

template <class Row, class ChunkDone>
Result<bool> StatsChunkReader::ForEachRowKey(const std::string& path, const StatsLayout& layout,
                                             const std::vector<StepRow>& steps,
                                             const std::vector<std::uint32_t>& capture_index,
                                             const std::function<bool(std::uint32_t)>& known,
                                             std::uint64_t tensors, Row row, ChunkDone chunk_done) {
  auto bad = [&](const std::string& what) { return Status::Corruption(path + ": stats: " + what); };
  std::size_t step = 0;
  bool have_id = false;
  std::uint32_t last_id = 0;
  for (std::size_t k = 0; k < layout.chunks.size(); ++k) {
    TSTAT_RETURN_IF_ERROR(DecodeChunk(fd_.get(), path, layout, k, runs_.keys));
    const std::uint64_t first = std::uint64_t{k} * layout.chunk_rows;
    const std::uint64_t end = std::min<std::uint64_t>(layout.rows, first + layout.chunk_rows);
    for (std::uint64_t r = first; r < end; ++r) {
      const StatsRow& key = chunk_rows_[static_cast<std::size_t>(r - first)];
      if (!IsStoredMode(key.mode)) return bad("invalid mode");
      // Rows of one tensor come together: the registry is asked per tensor.
      if (!have_id || key.tensor_id != last_id) {
        if (!known(key.tensor_id)) return bad("tensor id not in the registry");
        have_id = true;
        last_id = key.tensor_id;
      }
      const std::ptrdiff_t found = FindStep(steps, key.global_step, step);
      if (found < 0) return false;
      step = static_cast<std::size_t>(found);
      const std::uint32_t position = capture_index[static_cast<std::size_t>(r)];
      if (position >= tensors || !row(r - first, step, position)) return false;
    }
    chunk_done(first, end);
  }
  return true;
}

Result<bool> StatsChunkReader::ReadCaptureOrder(const std::string& path, std::uint64_t file_bytes,
                                                const StatsLayout& layout,
                                                const std::vector<StepRow>& steps,
                                                const std::vector<std::uint32_t>& capture_index,
                                                const std::function<bool(std::uint32_t)>& known,
                                                std::vector<PlacedStatsRow>* rows,
                                                std::vector<std::uint32_t>* per_step) {
  const std::uint64_t tensors = WriterTensors(layout, steps, capture_index);
  if (tensors == 0) return false;
  TSTAT_RETURN_IF_ERROR(CheckRowBytes(path, layout));
  TSTAT_RETURN_IF_ERROR(OpenSegmentFd(path, file_bytes));
  const CloseWhenDone close_fd{&fd_};
  const std::uint64_t places = tensors * steps.size();
  // Resized, not cleared: memory kept from the previous segment is not
  // zeroed again (every place used is written below).
  rows->resize(static_cast<std::size_t>(places));
  placed_.assign(static_cast<std::size_t>(places), 0);
  per_step->assign(steps.size(), 0);
  chunk_places_.resize(layout.chunk_rows);
  auto* out = reinterpret_cast<std::uint8_t*>(rows->data());
  // Each chunk's row keys, then each row's place, then the rows decoded
  // straight into their places: a run of rows whose places are equally far
  // apart (a tensor's steps) at a time.
  auto place_row = [&](std::uint64_t i, std::size_t step, std::uint32_t position) {
    const std::size_t place = static_cast<std::size_t>(step * tensors + position);
    if (placed_[place]) return false;
    placed_[place] = 1;
    ++(*per_step)[step];
    chunk_places_[static_cast<std::size_t>(i)] = place;
    return true;
  };
  auto decode_rows = [&](std::uint64_t first, std::uint64_t end) {
    const auto count = static_cast<std::size_t>(end - first);
    // The places are a segment's rows apart: each row's lines fetched for
    // writing before the planes are spread into them, not a miss per store.
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint8_t* row = out + chunk_places_[i] * sizeof(PlacedStatsRow);
      for (std::size_t line = 0; line < sizeof(PlacedStatsRow); line += 64) {
        __builtin_prefetch(row + line, 1);
      }
    }
    for (std::size_t a = 0; a < count;) {
      std::size_t b = a + 1;
      const std::size_t stride = b < count && chunk_places_[b] > chunk_places_[a]
                                     ? chunk_places_[b] - chunk_places_[a]
                                     : 1;
      while (b < count && chunk_places_[b] == chunk_places_[b - 1] + stride) ++b;
      UnshuffleRunsPart(inflated_.data() + a, layout.chunk_rows, b - a, runs_.placed.data(),
                        runs_.placed.size(), stride * sizeof(PlacedStatsRow),
                        out + chunk_places_[a] * sizeof(PlacedStatsRow));
      a = b;
    }
  };
  TSTAT_ASSIGN_OR_RETURN(bool writers, ForEachRowKey(path, layout, steps, capture_index, known,
                                                     tensors, place_row, decode_rows));
  if (!writers) return false;
  // A step's positions are 0 .. its records - 1: its rows are the first of
  // its places, moved up behind the previous step's.
  std::size_t used = 0;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const std::size_t base = static_cast<std::size_t>(s * tensors);
    const std::size_t count = (*per_step)[s];
    for (std::size_t c = 0; c < count; ++c) {
      if (!placed_[base + c]) return false;
    }
    if (used != base && count > 0) {
      std::memmove(static_cast<void*>(rows->data() + used), rows->data() + base,
                   count * sizeof(PlacedStatsRow));
    }
    used += count;
  }
  rows->resize(used);
  return true;
}

Result<bool> StatsChunkReader::ReadStep(const std::string& path, std::uint64_t file_bytes,
                                        const StatsLayout& layout,
                                        const std::vector<StepRow>& steps,
                                        const std::vector<std::uint32_t>& capture_index,
                                        const std::function<bool(std::uint32_t)>& known,
                                        std::int64_t global_step,
                                        std::vector<PlacedStatsRow>* rows) {
  const std::uint64_t tensors = WriterTensors(layout, steps, capture_index);
  if (tensors == 0) return false;
  const std::ptrdiff_t wanted = FindStep(steps, global_step, 0);
  if (wanted < 0) return false;
  TSTAT_RETURN_IF_ERROR(CheckRowBytes(path, layout));
  TSTAT_RETURN_IF_ERROR(OpenSegmentFd(path, file_bytes));
  const CloseWhenDone close_fd{&fd_};
  rows->resize(static_cast<std::size_t>(tensors));
  placed_.assign(static_cast<std::size_t>(tensors), 0);
  std::size_t count = 0;
  // Every chunk holds rows of the step (chunks hold tensors' runs of steps):
  // each is inflated and its row keys decoded and checked as a whole read
  // checks them; only the step's rows are decoded whole, into their places.
  auto place_row = [&](std::uint64_t i, std::size_t step, std::uint32_t position) {
    if (step != static_cast<std::size_t>(wanted)) return true;
    if (placed_[position]) return false;
    placed_[position] = 1;
    ++count;
    UnshuffleRunsPart(inflated_.data() + i, layout.chunk_rows, 1, runs_.placed.data(),
                      runs_.placed.size(), sizeof(PlacedStatsRow),
                      reinterpret_cast<std::uint8_t*>(rows->data() + position));
    return true;
  };
  TSTAT_ASSIGN_OR_RETURN(
      bool writers, ForEachRowKey(path, layout, steps, capture_index, known, tensors, place_row,
                                  [](std::uint64_t, std::uint64_t) {}));
  if (!writers) return false;
  // The step's positions are 0 .. its records - 1.
  for (std::size_t c = 0; c < count; ++c) {
    if (!placed_[c]) return false;
  }
  rows->resize(count);
  return true;
}

}  // namespace tstat::io
