// See segment_catalog.h. Encoding and decoding share one description of each
// row (the Visit* templates below), so the two cannot drift apart.
#include "io/format/segment_catalog.h"

#include <libdeflate.h>

#include <cstring>
#include <type_traits>

#include "io/format/segment_schema.h"
#include "io/format/stored_string_limits.h"

namespace tstat::io {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the catalog is little-endian");

constexpr char kFrameMagic[4] = {'T', 'S', 'C', 'F'};
constexpr std::size_t kFrameHeaderBytes = kCatalogFrameHeaderBytes;  // magic, length, CRC
constexpr std::uint8_t kHasConfig = 1, kHasRegistry = 2, kHasCounters = 4, kHasStatsLayout = 8;
constexpr std::size_t kMaxConfigBytes = 64u << 20;
constexpr std::uint32_t kMaxRank = 64;
// Bounds of what a writer's stats layout holds (64 KiB chunks of ~160-byte
// rows), so that a crafted one cannot size a reader's buffers.
constexpr std::uint32_t kMaxStatsRowBytes = 4096;
constexpr std::uint64_t kMaxStatsChunkBytes = 16u << 20;
// A chunk lies after the seal (the user block) at least.
constexpr std::uint64_t kCatalogMinChunkOffset = 512;

class FrameWriter {
 public:
  explicit FrameWriter(std::string* out) : out_(out) {}
  bool ok() const { return true; }
  template <class T>
  void Num(const T& v) {
    static_assert(std::is_arithmetic_v<T>);
    out_->append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  template <std::size_t N>
  void Chars(const char (&v)[N]) {
    out_->append(v, N);
  }
  // Strings of the writer's own data are already within their limits.
  void Str(const std::string& s, std::size_t /*max*/) {
    Num(static_cast<std::uint32_t>(s.size()));
    out_->append(s);
  }
  // A count of elements that follow.
  void Count(std::uint64_t n, std::size_t /*min_element_bytes*/) { Num(n); }

 private:
  std::string* out_;
};

class FrameReader {
 public:
  FrameReader(const std::uint8_t* p, std::size_t n) : p_(p), end_(p + n) {}
  bool ok() const { return problem_.empty(); }
  const std::string& problem() const { return problem_; }
  bool done() const { return p_ == end_; }
  void Fail(const std::string& why) {
    if (problem_.empty()) problem_ = why;
  }
  template <class T>
  void Num(T& v) {
    static_assert(std::is_arithmetic_v<T>);
    if (!Take(sizeof v)) return;
    std::memcpy(&v, p_ - sizeof v, sizeof v);
  }
  template <std::size_t N>
  void Chars(char (&v)[N]) {
    if (!Take(N)) return;
    std::memcpy(v, p_ - N, N);
  }
  void Str(std::string& s, std::size_t max) {
    std::uint32_t n = 0;
    Num(n);
    if (!ok()) return;
    if (n > max)
      return Fail("a string of " + std::to_string(n) + " bytes (at most " + std::to_string(max) +
                  ")");
    if (!Take(n)) return;
    s.assign(reinterpret_cast<const char*>(p_ - n), n);
  }
  // Reads a count; each element takes at least `min_element_bytes`, so a
  // count the rest of the frame cannot hold is refused before anything is
  // sized by it.
  void Count(std::uint64_t& n, std::size_t min_element_bytes) {
    Num(n);
    if (!ok()) return;
    const auto left = static_cast<std::uint64_t>(end_ - p_);
    if (n > left / min_element_bytes) Fail("a count of " + std::to_string(n) + " past the frame");
  }

 private:
  bool Take(std::size_t n) {
    if (!ok()) return false;
    if (static_cast<std::size_t>(end_ - p_) < n) {
      Fail("a frame shorter than its contents");
      return false;
    }
    p_ += n;
    return true;
  }
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  std::string problem_;
};

// Each row's fields, for both directions (Row: T or const T).
template <class IO, class Row>
void VisitKey(IO& io, Row& r) {
  io.Num(r.global_step);
  io.Num(r.mode);
  io.Num(r.mode_step);
}
template <class IO, class Row>
void VisitStep(IO& io, Row& r) {
  VisitKey(io, r);
  io.Num(r.wall_time);
  io.Num(r.step_seconds);
  io.Num(r.capture_seconds);
}
template <class IO, class Row>
void VisitScalar(IO& io, Row& r) {
  VisitKey(io, r);
  io.Num(r.scalar_id);
  io.Num(r.value);
  io.Num(r.wall_time);
}
template <class IO, class Row>
void VisitRawIndex(IO& io, Row& r) {
  VisitKey(io, r);
  io.Num(r.tensor_id);
  io.Chars(r.dataset);
  io.Chars(r.dtype);
  io.Num(r.rank);
  io.Num(r.shape_offset);
  io.Num(r.byte_offset);
  io.Num(r.byte_count);
}
template <class IO, class Entry>
void VisitDrop(IO& io, Entry& d) {
  io.Num(d.key.global_step);
  std::uint8_t mode = static_cast<std::uint8_t>(d.key.mode);
  io.Num(mode);
  if constexpr (!std::is_const_v<Entry>) d.key.mode = static_cast<Mode>(mode);
  io.Num(d.key.mode_step);
  io.Num(d.drop.tensor_id);
  io.Str(d.drop.kind, kDropKindChars);
  io.Str(d.drop.reason, kDropReasonChars);
  io.Num(d.drop.bytes);
}
template <class IO, class C>
void VisitCounters(IO& io, C& c) {
  io.Num(c.steps_captured);
  io.Num(c.records_written);
  io.Num(c.bytes_written);
  io.Num(c.raw_dropped);
  io.Num(c.raw_dropped_bytes);
  io.Num(c.records_lost);
  io.Num(c.write_errors);
  io.Num(c.stats_waits);
  io.Num(c.stats_wait_seconds);
  io.Num(c.queue_high_water);
  io.Num(c.queue_high_water_bytes);
  io.Num(c.segments_written);
  io.Num(c.capture.steps);
  io.Num(c.capture.steps_saved);
  io.Num(c.capture.step_seconds);
  io.Num(c.capture.capture_seconds);
}
template <class IO, class H>
void VisitHeader(IO& io, H& h) {
  io.Num(h.format_version);
  io.Num(h.rank);
  io.Num(h.world_size);
  io.Str(h.host, kHeaderHostChars - 1);
  io.Num(h.segment_index);
  io.Str(h.tstat_version, kHeaderVersionChars - 1);
  io.Num(h.created_unix_time);
}

// A table: its row count, then the rows.
template <class IO, class Vec, class Visit>
void VisitRows(IO& io, Vec& rows, std::size_t min_row_bytes, Visit visit) {
  std::uint64_t n = rows.size();
  io.Count(n, min_row_bytes);
  if constexpr (!std::is_const_v<Vec>) {
    if (!io.ok()) return;
    rows.resize(static_cast<std::size_t>(n));
  }
  for (auto& r : rows) {
    if (!io.ok()) return;
    visit(io, r);
  }
}

void EncodeTensor(FrameWriter& w, const TensorInfo& t) {
  w.Num(t.id);
  w.Str(t.name, kTensorNameChars);
  w.Num(static_cast<std::uint8_t>(t.kind == TensorKind::kScalar ? 1 : 0));
  char dtype[kDTypeChars];
  SetDTypeChars(t.dtype, dtype);
  w.Chars(dtype);
  w.Num(static_cast<std::uint8_t>(t.space == MemorySpace::kCuda ? 1 : 0));
  w.Count(t.shape.size(), 8);
  for (std::int64_t d : t.shape) w.Num(d);
  w.Count(t.collections.size(), 4);
  for (const std::string& c : t.collections) w.Str(c, kCollectionNameChars);
}

void DecodeTensor(FrameReader& r, TensorInfo* t) {
  r.Num(t->id);
  r.Str(t->name, kTensorNameChars);
  if (r.ok() && (t->name.empty() || t->name.find('\0') != std::string::npos)) {
    return r.Fail("a tensor name that is empty or holds NUL");
  }
  std::uint8_t kind = 0, space = 0;
  char dtype[kDTypeChars];
  r.Num(kind);
  r.Chars(dtype);
  r.Num(space);
  if (!r.ok()) return;
  if (kind > 1 || space > 1 || !ParseDTypeChars(dtype, &t->dtype)) {
    return r.Fail("tensor '" + t->name + "': unknown kind, dtype or memory space");
  }
  t->kind = kind == 1 ? TensorKind::kScalar : TensorKind::kTensor;
  t->space = space == 1 ? MemorySpace::kCuda : MemorySpace::kHost;
  std::uint64_t rank = 0;
  r.Count(rank, 8);
  if (!r.ok()) return;
  if (rank > kMaxRank) return r.Fail("tensor '" + t->name + "': rank past 64");
  t->shape.resize(static_cast<std::size_t>(rank));
  for (std::int64_t& d : t->shape) r.Num(d);
  std::uint64_t collections = 0;
  r.Count(collections, 4);
  if (!r.ok()) return;
  t->collections.resize(static_cast<std::size_t>(collections));
  for (std::string& c : t->collections) r.Str(c, kCollectionNameChars);
}

template <class IO, class L>
void VisitStatsLayout(IO& io, L& l) {
  io.Num(l.row_bytes);
  io.Num(l.chunk_rows);
  io.Num(l.rows);
  VisitRows(io, l.chunks, 16, [](IO& io2, auto& c) {
    io2.Num(c.offset);
    io2.Num(c.stored_bytes);
    io2.Num(c.crc32);
  });
  VisitRows(io, l.tensors, 17, [](IO& io2, auto& t) {
    io2.Num(t.tensor_id);
    io2.Num(t.count);
    io2.Num(t.first_row);
    io2.Num(t.rows);
    io2.Num(t.modes);
  });
}

// What a writer's layout always is: chunks that tile the rows and lie in
// the file, tensor ranges ascending and disjoint.
void CheckStatsLayout(FrameReader& r, const StatsLayout& l, std::uint64_t file_bytes) {
  if (!r.ok()) return;
  if (l.row_bytes == 0 || l.chunk_rows == 0 || l.rows == 0) {
    return r.Fail("stats layout of zero rows or row bytes");
  }
  if (l.row_bytes > kMaxStatsRowBytes ||
      std::uint64_t{l.chunk_rows} * l.row_bytes > kMaxStatsChunkBytes) {
    return r.Fail("stats layout of rows or chunks larger than a writer makes");
  }
  if (l.chunks.size() != (l.rows + l.chunk_rows - 1) / l.chunk_rows) {
    return r.Fail("stats layout whose chunks do not tile its rows");
  }
  const std::uint64_t chunk_bytes = std::uint64_t{l.chunk_rows} * l.row_bytes;
  for (const StatsChunk& c : l.chunks) {
    if (c.stored_bytes == 0 || c.stored_bytes > chunk_bytes + chunk_bytes / 8 + 1024 ||
        c.offset < kCatalogMinChunkOffset || c.offset > file_bytes ||
        c.stored_bytes > file_bytes - c.offset) {
      return r.Fail("stats chunk outside the segment file");
    }
  }
  std::uint64_t next_id = 0, next_row = 0;
  for (const StatsTensorRange& t : l.tensors) {
    const std::uint64_t rows = std::uint64_t{t.count} * t.rows;
    // Modes 1..4 (TRAIN, EVAL, PREDICT, GLOBAL): bits 1 to 4, at least one.
    if (t.modes == 0 || (t.modes & ~0x1Eu) != 0) {
      return r.Fail("stats tensor range of modes " + std::to_string(t.modes));
    }
    if (t.count == 0 || t.rows == 0 || t.tensor_id < next_id || t.first_row < next_row ||
        t.first_row > l.rows || rows > l.rows - t.first_row) {
      return r.Fail("stats tensor ranges out of order or outside the rows");
    }
    next_id = std::uint64_t{t.tensor_id} + t.count;
    next_row = t.first_row + rows;
  }
}

// The payload of one frame.
Status DecodePayload(const std::uint8_t* p, std::size_t n, CatalogEntry* e) {
  FrameReader r(p, n);
  std::uint32_t version = 0;
  r.Num(version);
  if (r.ok() && version != kCatalogVersion) {
    return Status::NotSupported("catalog frame of version " + std::to_string(version));
  }
  r.Num(e->file_bytes);
  VisitHeader(r, e->header);
  std::uint8_t flags = 0;
  r.Num(flags);
  e->has_config = (flags & kHasConfig) != 0;
  e->has_registry = (flags & kHasRegistry) != 0;
  if (e->has_config) r.Str(e->header.config_json, kMaxConfigBytes);
  if (e->has_registry) {
    std::uint64_t count = 0;
    r.Count(count, 24);
    if (r.ok()) e->tensors.resize(static_cast<std::size_t>(count));
    for (TensorInfo& t : e->tensors) {
      if (!r.ok()) break;
      DecodeTensor(r, &t);
    }
  }
  SegmentBuffers& b = e->tables;
  VisitRows(r, b.steps, 41, [](FrameReader& io, StepRow& row) { VisitStep(io, row); });
  VisitRows(r, b.scalars, 37, [](FrameReader& io, ScalarRow& row) { VisitScalar(io, row); });
  VisitRows(r, b.drops, 37, [](FrameReader& io, DropEntry& d) { VisitDrop(io, d); });
  VisitRows(r, b.raw_index, 81, [](FrameReader& io, RawIndexRow& row) { VisitRawIndex(io, row); });
  VisitRows(r, b.raw_shapes, 8, [](FrameReader& io, std::int64_t& d) { io.Num(d); });
  if (flags & kHasCounters) VisitCounters(r, e->counters.emplace());
  if (flags & kHasStatsLayout) {
    VisitStatsLayout(r, e->stats_layout.emplace());
    CheckStatsLayout(r, *e->stats_layout, e->file_bytes);
  }
  if (r.ok() && !r.done()) r.Fail("bytes after the frame's contents");
  if (!r.ok()) return Status::Corruption(r.problem());
  return Status::OK();
}

std::uint32_t Load32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

Status EncodeCatalogFrame(const CatalogEntry& e, std::string* out) {
  std::string payload;
  FrameWriter w(&payload);
  w.Num(kCatalogVersion);
  w.Num(e.file_bytes);
  VisitHeader(w, e.header);
  w.Num(static_cast<std::uint8_t>(
      (e.has_config ? kHasConfig : 0) | (e.has_registry ? kHasRegistry : 0) |
      (e.counters ? kHasCounters : 0) | (e.stats_layout ? kHasStatsLayout : 0)));
  if (e.has_config) w.Str(e.header.config_json, kMaxConfigBytes);
  if (e.has_registry) {
    w.Count(e.tensors.size(), 24);
    for (const TensorInfo& t : e.tensors) EncodeTensor(w, t);
  }
  const SegmentBuffers& b = e.tables;
  VisitRows(w, b.steps, 41, [](FrameWriter& io, const StepRow& r) { VisitStep(io, r); });
  VisitRows(w, b.scalars, 37, [](FrameWriter& io, const ScalarRow& r) { VisitScalar(io, r); });
  VisitRows(w, b.drops, 37, [](FrameWriter& io, const DropEntry& d) { VisitDrop(io, d); });
  VisitRows(w, b.raw_index, 81,
            [](FrameWriter& io, const RawIndexRow& r) { VisitRawIndex(io, r); });
  VisitRows(w, b.raw_shapes, 8, [](FrameWriter& io, const std::int64_t& d) { io.Num(d); });
  if (e.counters) VisitCounters(w, *e.counters);
  if (e.stats_layout) VisitStatsLayout(w, *e.stats_layout);
  if (payload.size() > kMaxCatalogFrameBytes) {
    return Status::ResourceExhausted("catalog frame of " + std::to_string(payload.size()) +
                                     " bytes (at most " + std::to_string(kMaxCatalogFrameBytes) +
                                     ")");
  }
  const auto length = static_cast<std::uint32_t>(payload.size());
  const auto crc = static_cast<std::uint32_t>(libdeflate_crc32(0, payload.data(), payload.size()));
  out->append(kFrameMagic, sizeof kFrameMagic);
  out->append(reinterpret_cast<const char*>(&length), 4);
  out->append(reinterpret_cast<const char*>(&crc), 4);
  out->append(payload);
  return Status::OK();
}

CatalogFrames DecodeCatalogFrames(const std::uint8_t* data, std::uint64_t size) {
  CatalogFrames frames;
  std::uint64_t at = 0;
  while (at < size) {
    if (size - at < kFrameHeaderBytes) {
      frames.problem = "an incomplete frame header at byte " + std::to_string(at);
      frames.incomplete = true;
      break;
    }
    const std::uint8_t* h = data + at;
    if (std::memcmp(h, kFrameMagic, sizeof kFrameMagic) != 0) {
      frames.problem = "no frame at byte " + std::to_string(at);
      break;
    }
    const std::uint32_t length = Load32(h + 4);
    if (length > kMaxCatalogFrameBytes) {
      frames.problem =
          "a frame of " + std::to_string(length) + " bytes at byte " + std::to_string(at);
      break;
    }
    if (size - at - kFrameHeaderBytes < length) {
      frames.problem = "an incomplete frame at byte " + std::to_string(at);
      frames.incomplete = true;
      break;
    }
    const std::uint8_t* payload = h + kFrameHeaderBytes;
    if (static_cast<std::uint32_t>(libdeflate_crc32(0, payload, length)) != Load32(h + 8)) {
      frames.problem = "a frame failing its CRC at byte " + std::to_string(at);
      break;
    }
    CatalogEntry e;
    Status parsed = DecodePayload(payload, length, &e);
    if (!parsed.ok()) {
      frames.problem = "frame at byte " + std::to_string(at) + ": " + parsed.message();
      break;
    }
    frames.entries.push_back(std::move(e));
    at += kFrameHeaderBytes + length;
  }
  frames.used = at;
  return frames;
}

}  // namespace tstat::io
