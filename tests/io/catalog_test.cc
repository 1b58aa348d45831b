// The worker catalog (io/format/segment_catalog.h): a run opened from it
// answers every query exactly as the same run opened from its segments; a
// catalog cut at any byte, damaged, crafted or replaced by a hostile file
// never changes an answer (the segments are read instead); a live run's new
// segments come from the catalog on Refresh(); a writer that finds a file
// named catalog leaves it alone.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/format/run_layout.h"
#include "io/format/segment_catalog.h"
#include "io/format/segment_schema.h"
#include "io/h5/posix_file.h"
#include "io/write/grouped_stats_table.h"
#include "io/write/hdf5_run_writer.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Five segments of tensors a, b (from segment 2) and scalar loss; b's shape
// changes in segment 3; TRAIN and EVAL steps, raw snapshots, drops and
// counters at each flush.
// With `open`, the writer is handed back unclosed.
void WriteRichRun(const std::string& run, std::unique_ptr<Hdf5RunWriter>* open = nullptr,
                  int compression_level = 4) {
  auto writer = OpenWriterOrDie(run, 0, 1, "{\"test\": true}", compression_level);
  ASSERT_NE(writer, nullptr);
  TSTAT_ASSERT_OK(
      writer->RegisterTensors({MakeTensorInfo(0, "a", {"weights"}), MakeScalarInfo(1, "loss"),
                               MakeTensorInfo(3, "c", {"outputs"})}));
  TensorInfo b = MakeTensorInfo(2, "b", {"gradients", "all"});
  std::int64_t train = 0, eval = 0;
  for (std::int64_t g = 0; g < 15; ++g) {
    if (g == 6) TSTAT_ASSERT_OK(writer->RegisterTensors({b}));
    if (g == 9) {
      b.shape = {4, 2};
      TSTAT_ASSERT_OK(writer->RegisterTensors({b}));
    }
    const bool is_eval = g % 5 == 4;
    StepBatch batch =
        MakeBatch(g, is_eval ? Mode::kEval : Mode::kTrain, is_eval ? eval++ : train++);
    batch.wall_time = 1000.0 + g;
    batch.stats.push_back(ReferenceRecord(g, 0, g % 2 == 0));
    if (g >= 6) batch.stats.push_back(ReferenceRecord(g, 2, false));
    if (is_eval) batch.stats.push_back(ReferenceRecord(g, 3, false));  // c: EVAL steps only
    batch.scalars.push_back(ScalarRecord{1, 0.5 * static_cast<double>(g), 2000.0 + g});
    if (g % 3 == 0) {
      std::vector<std::uint8_t> bytes(3 * 8 * 4);
      for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i + g);
      batch.raws.push_back(MakeRawSnapshot(0, DType::kFloat32, {3, 8}, std::move(bytes)));
    }
    if (g == 7) batch.drops.push_back(DropRecord{0, "raw", "raw snapshot memory cap", 4096});
    TSTAT_ASSERT_OK(writer->Write(batch));
    if (g % 3 == 2) {
      PipelineCounters c;
      c.steps_captured = static_cast<std::uint64_t>(g + 1);
      c.stats_wait_seconds = 0.25 * static_cast<double>(g);
      c.capture = CaptureTotals{static_cast<std::uint64_t>(g + 1), 3, 1.5, 0.01};
      TSTAT_ASSERT_OK(writer->Flush(c));
    }
  }
  if (open != nullptr) {
    *open = std::move(writer);
    return;
  }
  TSTAT_ASSERT_OK(writer->Close({}));
}

// The answers of a Trial opened on `run`, and its Refresh() status.
std::string OpenAndAnswer(const std::string& run, Status* refreshed = nullptr,
                          const TrialOptions& options = {}) {
  auto trial = Trial::Open(run, options);
  if (!trial.ok()) return "open failed: " + trial.status().ToString();
  const Status s = (*trial)->Refresh();
  if (refreshed != nullptr) *refreshed = s;
  return TrialAnswers(**trial);
}

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = dir_.Sub("run");
    WriteRichRun(run_);
    worker_ = run_ + "/" + WorkerDirName(0);
    catalog_path_ = worker_ + "/" + kCatalogFileName;
    auto catalog = ReadWholeFile(catalog_path_);
    TSTAT_ASSERT_OK(catalog);
    catalog_ = *catalog;
    Status refreshed;
    with_catalog_ = OpenAndAnswer(run_, &refreshed);
    TSTAT_ASSERT_OK(refreshed);
    TSTAT_ASSERT_OK(RemoveFile(catalog_path_));
    from_segments_ = OpenAndAnswer(run_, &refreshed);
    TSTAT_ASSERT_OK(refreshed);
  }

  // The frames of the catalog as written.
  std::vector<CatalogEntry> Frames() const {
    CatalogFrames f = DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(catalog_.data()),
                                          catalog_.size());
    EXPECT_TRUE(f.problem.empty()) << f.problem;
    return std::move(f.entries);
  }

  // With the catalog at `bytes`, the run answers as from its segments.
  void ExpectSameAnswers(const std::string& bytes, const std::string& what) {
    SCOPED_TRACE(what);
    WriteFile(catalog_path_, bytes);
    Status refreshed;
    EXPECT_EQ(OpenAndAnswer(run_, &refreshed), from_segments_);
    TSTAT_EXPECT_OK(refreshed);
  }

  TempDir dir_;
  std::string run_, worker_, catalog_path_, catalog_;
  std::string with_catalog_, from_segments_;
};

TEST_F(CatalogTest, OneFramePerSegmentCarryingRegistryAndConfigOnlyWhenChanged) {
  const std::vector<CatalogEntry> frames = Frames();
  ASSERT_EQ(frames.size(), 5u);
  const bool registry[] = {true, false, true, true, false};
  for (std::size_t i = 0; i < frames.size(); ++i) {
    SCOPED_TRACE(i);
    const CatalogEntry& e = frames[i];
    EXPECT_EQ(e.header.segment_index, static_cast<std::int64_t>(i));
    EXPECT_EQ(e.file_bytes,
              FileSize(worker_ + "/" + SegmentFileName(static_cast<std::int64_t>(i))).value());
    EXPECT_EQ(e.has_config, i == 0);
    EXPECT_EQ(e.has_registry, registry[i]);
    EXPECT_EQ(e.tables.steps.size(), 3u);
    EXPECT_EQ(e.tables.scalars.size(), 3u);
    EXPECT_EQ(e.tables.raw_index.size(), 1u);
    ASSERT_TRUE(e.counters.has_value());
    EXPECT_EQ(e.counters->steps_captured, 3 * i + 3);
    EXPECT_TRUE(e.tables.stats.empty());
    ASSERT_TRUE(e.stats_layout.has_value());
    // a; b from segment 2 on; c at the EVAL steps 4, 9 and 14 (segments 1, 3, 4).
    const std::uint64_t rows[] = {3, 4, 6, 7, 7};
    const std::size_t ranges[] = {1, 2, 2, 3, 3};
    EXPECT_EQ(e.stats_layout->rows, rows[i]);
    EXPECT_EQ(e.stats_layout->tensors.size(), ranges[i]);
    // a's rows hold both modes where the segment has an EVAL step, c's EVAL only.
    const std::uint8_t train = 1u << static_cast<int>(Mode::kTrain);
    const std::uint8_t eval = 1u << static_cast<int>(Mode::kEval);
    EXPECT_EQ(e.stats_layout->tensors[0].modes, (i == 1 || i >= 3) ? train | eval : train);
    if (ranges[i] == 3 || i == 1) {
      EXPECT_EQ(e.stats_layout->tensors.back().modes, eval);
    }
    EXPECT_EQ(e.stats_layout->chunks.size(), 1u);
  }
  ASSERT_EQ(frames[3].tensors.size(), 4u);
  EXPECT_EQ(frames[3].tensors[2].shape, (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(frames[2].tables.drops.size(), 1u);
  // Encoding a decoded frame gives the same bytes.
  std::string again;
  for (const CatalogEntry& e : frames) TSTAT_ASSERT_OK(EncodeCatalogFrame(e, &again));
  EXPECT_EQ(again, catalog_);
}

TEST_F(CatalogTest, OpensAsFromTheSegmentsWithoutReadingThem) {
  EXPECT_EQ(with_catalog_, from_segments_);
  EXPECT_NE(from_segments_.find("drop 0 raw raw snapshot memory cap 4096"), std::string::npos);
  // Segment 1 replaced by zeros of its size: the run still opens whole from
  // the catalog (the segment is not read), and the records of its steps are
  // kCorruption naming it.
  WriteFile(catalog_path_, catalog_);
  const std::string seg1 = worker_ + "/" + SegmentFileName(1);
  WriteFile(seg1, std::string(FileSize(seg1).value(), '\0'));
  auto trial = Trial::Open(run_);
  TSTAT_ASSERT_OK(trial);
  TSTAT_EXPECT_OK((*trial)->Refresh());
  EXPECT_EQ((*trial)->steps().size(), 15u);
  TSTAT_EXPECT_OK((*trial)->record("a", 0).status());
  const Status damaged = (*trial)->step_records(0, 4).status();
  EXPECT_EQ(damaged.code(), StatusCode::kCorruption) << damaged.ToString();
  EXPECT_NE(damaged.message().find(SegmentFileName(1)), std::string::npos) << damaged.message();
}

// The segment whose frame changed the registry (3: b's shape) is missing:
// the next frame carries that registry over, and the index takes it there,
// as it takes the registry segment 4's file holds without the catalog.
TEST_F(CatalogTest, RegistryOfAMissingSegmentsFrameReachesTheNextSegment) {
  TSTAT_ASSERT_OK(RemoveFile(worker_ + "/" + SegmentFileName(3)));
  const std::string without = OpenAndAnswer(run_);
  WriteFile(catalog_path_, catalog_);
  auto trial = Trial::Open(run_);
  TSTAT_ASSERT_OK(trial);
  auto b = (*trial)->tensor_info("b", 0);
  TSTAT_ASSERT_OK(b);
  EXPECT_EQ(b->shape, (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(TrialAnswers(**trial), without);
}

// The first segment, whose frame alone carries the config and the first
// registry, is missing: the run still has both, as from the segments.
TEST_F(CatalogTest, ConfigAndRegistryOfAMissingFirstSegmentReachTheNext) {
  TSTAT_ASSERT_OK(RemoveFile(worker_ + "/" + SegmentFileName(0)));
  const std::string without = OpenAndAnswer(run_);
  EXPECT_NE(without.find("config {\"test\": true}"), std::string::npos) << without;
  WriteFile(catalog_path_, catalog_);
  EXPECT_EQ(OpenAndAnswer(run_), without);
}

TEST_F(CatalogTest, CutAtAnyByteReadsTheRestFromTheSegments) {
  for (std::size_t cut = 0; cut < catalog_.size(); cut += (cut < 64 ? 1 : 61)) {
    ExpectSameAnswers(catalog_.substr(0, cut), "cut at " + std::to_string(cut));
  }
}

TEST_F(CatalogTest, DamagedBytesReadTheRestFromTheSegments) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 60; ++i) {
    std::string damaged = catalog_;
    const std::size_t at = i < 12 ? static_cast<std::size_t>(i) : rng() % damaged.size();
    damaged[at] = static_cast<char>(damaged[at] ^ (1 << (rng() % 8)));
    ExpectSameAnswers(damaged, "byte " + std::to_string(at) + " changed");
  }
  ExpectSameAnswers(catalog_ + std::string(100, '\0'), "zeros appended");
  ExpectSameAnswers(catalog_ + "TSCF", "a frame begun");
}

TEST_F(CatalogTest, HostileCatalogFilesAreNotRead) {
  for (const std::string& kind : HostileFileKinds()) {
    std::filesystem::remove_all(catalog_path_);
    ASSERT_TRUE(MakeHostileFile(catalog_path_, kind)) << kind;
    const auto t0 = std::chrono::steady_clock::now();
    Status refreshed;
    EXPECT_EQ(OpenAndAnswer(run_, &refreshed), from_segments_) << kind;
    TSTAT_EXPECT_OK(refreshed);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << kind;
  }
}

// Frames with a valid CRC and contents no writer makes: each is refused and
// the segments are read (from that frame on).
TEST_F(CatalogTest, CraftedFramesAreRefused) {
  struct Craft {
    const char* what;
    std::function<void(CatalogEntry*)> edit;
    // What decoding says (nullptr: the frame decodes, and the reader's
    // checks of its rows or of the file refuse it).
    const char* decode_problem = nullptr;
  };
  const std::vector<Craft> crafts = {
      {"invalid step mode", [](CatalogEntry* e) { e->tables.steps[0].mode = 9; }},
      {"scalar of an unknown id", [](CatalogEntry* e) { e->tables.scalars[0].scalar_id = 77; }},
      {"raw shape outside raw_shapes",
       [](CatalogEntry* e) { e->tables.raw_index[0].shape_offset = std::uint64_t{1} << 62; }},
      {"raw dtype unknown",
       [](CatalogEntry* e) { std::memcpy(e->tables.raw_index[0].dtype, "zz", 3); }},
      {"NUL in a tensor name", [](CatalogEntry* e) { e->tensors[0].name = std::string("a\0b", 3); },
       "empty or holds NUL"},
      {"empty tensor name", [](CatalogEntry* e) { e->tensors[0].name.clear(); },
       "empty or holds NUL"},
      {"rank 65", [](CatalogEntry* e) { e->tensors[0].shape.assign(65, 1); }, "rank past 64"},
      {"file size not the segment's", [](CatalogEntry* e) { e->file_bytes += 1; }},
      {"another rank", [](CatalogEntry* e) { e->header.rank = 1; }},
      {"world size 0", [](CatalogEntry* e) { e->header.world_size = 0; }},
      {"first frame without the registry", [](CatalogEntry* e) { e->has_registry = false; }},
      {"first frame without the config", [](CatalogEntry* e) { e->has_config = false; }},
      {"drop of an invalid mode",
       [](CatalogEntry* e) {
         e->tables.drops.push_back(DropEntry{StepKey{0, Mode(0), 0}, {}});
       }},
      {"stats chunk past the file",
       [](CatalogEntry* e) { e->stats_layout->chunks[0].offset = e->file_bytes; },
       "stats chunk outside the segment file"},
      {"stats chunk before the seal's end",
       [](CatalogEntry* e) { e->stats_layout->chunks[0].offset = 100; },
       "stats chunk outside the segment file"},
      {"stats chunks that do not tile the rows",
       [](CatalogEntry* e) { e->stats_layout->chunks.push_back(e->stats_layout->chunks[0]); },
       "do not tile"},
      {"stats chunks of 4 GiB rows", [](CatalogEntry* e) { e->stats_layout->chunk_rows = ~0u; },
       "larger than a writer makes"},
      {"stats tensor range repeated",
       [](CatalogEntry* e) { e->stats_layout->tensors.push_back(e->stats_layout->tensors[0]); },
       "out of order or outside the rows"},
      {"stats tensor range past the rows",
       [](CatalogEntry* e) { e->stats_layout->tensors.back().rows += 1; },
       "out of order or outside the rows"},
      {"stats tensor range of no tensors",
       [](CatalogEntry* e) { e->stats_layout->tensors.back().count = 0; },
       "out of order or outside the rows"},
  };
  for (const Craft& c : crafts) {
    std::vector<CatalogEntry> frames = Frames();
    c.edit(&frames[0]);
    std::string bytes;
    for (const CatalogEntry& e : frames) TSTAT_ASSERT_OK(EncodeCatalogFrame(e, &bytes));
    const CatalogFrames decoded =
        DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    if (c.decode_problem != nullptr) {
      EXPECT_EQ(decoded.used, 0u) << c.what;
      EXPECT_NE(decoded.problem.find(c.decode_problem), std::string::npos)
          << c.what << ": " << decoded.problem;
    } else {
      EXPECT_TRUE(decoded.problem.empty()) << c.what << ": " << decoded.problem;
    }
    ExpectSameAnswers(bytes, c.what);
  }
  // Counts past the frame, a frame of another version: not decoded at all.
  std::vector<CatalogEntry> frames = Frames();
  std::string bytes;
  TSTAT_ASSERT_OK(EncodeCatalogFrame(frames[0], &bytes));
  for (std::size_t at = 12; at + 8 <= bytes.size(); at += 7) {
    std::string crafted = bytes;
    const std::uint64_t huge = ~std::uint64_t{0} >> 1;
    std::memcpy(crafted.data() + at, &huge, 8);
    const auto crc =
        static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(crafted.data() + 12),
                                         static_cast<uInt>(crafted.size() - 12)));
    std::memcpy(crafted.data() + 8, &crc, 4);
    CatalogFrames decoded =
        DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(crafted.data()), crafted.size());
    if (at == 12) {
      EXPECT_NE(decoded.problem.find("version"), std::string::npos) << decoded.problem;
    }
    if (!decoded.problem.empty()) {
      EXPECT_EQ(decoded.used, 0u);
      EXPECT_FALSE(decoded.incomplete);
    }
  }
}

// A stats layout that passes every check and is wrong all the same (chunk
// CRCs, offsets or ranges of another tensor: a crafted catalog): the series
// that reads through it fails naming the segment, nothing else changes.
TEST_F(CatalogTest, StatsLayoutThatLiesFailsTheSeriesThatReadsIt) {
  struct Craft {
    const char* what;
    const char* needle;
    std::function<void(StatsLayout*)> edit;
  };
  const std::vector<Craft> crafts = {
      {"another CRC", "fails its CRC", [](StatsLayout* l) { l->chunks[0].crc32 ^= 1; }},
      {"another offset", "fails its CRC", [](StatsLayout* l) { l->chunks[0].offset += 1; }},
      {"another tensor's range", "in the range of tensor",
       [](StatsLayout* l) {
         l->tensors[0].first_row = l->tensors[1].first_row;  // b's rows, said to be a's
         l->tensors[0].rows = l->tensors[1].rows;
         l->tensors.erase(l->tensors.begin() + 1);
       }},
      {"rows of another size", "rows of 159 bytes", [](StatsLayout* l) { l->row_bytes += 1; }},
  };
  for (const Craft& c : crafts) {
    SCOPED_TRACE(c.what);
    std::vector<CatalogEntry> frames = Frames();
    ASSERT_TRUE(frames[3].stats_layout.has_value());
    ASSERT_GE(frames[3].stats_layout->tensors.size(), 2u);
    c.edit(&*frames[3].stats_layout);
    std::string bytes;
    for (const CatalogEntry& e : frames) TSTAT_ASSERT_OK(EncodeCatalogFrame(e, &bytes));
    WriteFile(catalog_path_, bytes);
    auto trial = Trial::Open(run_);
    TSTAT_ASSERT_OK(trial);
    TSTAT_EXPECT_OK((*trial)->Refresh());
    const Status s = (*trial)->series("a", StatField::kL2).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find(SegmentFileName(3)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
    TSTAT_EXPECT_OK((*trial)->step_records(0, 9).status());
  }
}

TEST_F(CatalogTest, LiveRunSegmentsComeFromTheCatalogOnRefresh) {
  TempDir live_dir;
  const std::string run = live_dir.Sub("run");
  std::unique_ptr<Hdf5RunWriter> writer;
  WriteRichRun(run, &writer);
  ASSERT_NE(writer, nullptr);
  auto trial = Trial::Open(run);
  TSTAT_ASSERT_OK(trial);
  EXPECT_EQ((*trial)->steps().size(), 15u);
  // Two more segments; the second one's file is replaced by zeros of its
  // size before the reader looks: its steps are there all the same (read
  // from the catalog, not the file).
  for (std::int64_t g = 15; g < 17; ++g) {
    StepBatch batch = MakeBatch(g, Mode::kTrain, g);
    batch.stats.push_back(ReferenceRecord(g, 0, false));
    TSTAT_ASSERT_OK(writer->Write(batch));
    TSTAT_ASSERT_OK(writer->Flush({}));
  }
  const std::string last = run + "/" + WorkerDirName(0) + "/" + SegmentFileName(6);
  WriteFile(last, std::string(FileSize(last).value(), '\0'));
  TSTAT_EXPECT_OK((*trial)->Refresh());
  EXPECT_EQ((*trial)->steps().size(), 17u);
  TSTAT_EXPECT_OK((*trial)->record("a", 15).status());
  EXPECT_EQ((*trial)->record("a", 16).status().code(), StatusCode::kCorruption);
  TSTAT_ASSERT_OK(writer->Close({}));
  TSTAT_EXPECT_OK((*trial)->Refresh());
  EXPECT_TRUE((*trial)->loaded_all_steps());
}

// The stats rows grouped by tensor read alike at every compression level:
// level 0 (a contiguous dataset, no stats layout in the catalog: series read
// it through HDF5), level 1 (tstat's encoder, each row against the one
// before it) and level 6, against level 4.
TEST(CatalogWriterTest, EveryCompressionLevelAnswersAlike) {
  const auto answers = [](int level, bool* layouts) {
    TempDir dir;
    const std::string run = dir.Sub("run");
    WriteRichRun(run, nullptr, level);
    auto catalog = ReadWholeFile(run + "/" + WorkerDirName(0) + "/" + kCatalogFileName);
    EXPECT_TRUE(catalog.ok());
    const CatalogFrames frames = DecodeCatalogFrames(
        reinterpret_cast<const std::uint8_t*>(catalog->data()), catalog->size());
    EXPECT_EQ(frames.entries.size(), 5u);
    *layouts = !frames.entries.empty();
    for (const CatalogEntry& e : frames.entries) *layouts = *layouts && e.stats_layout.has_value();
    Status refreshed;
    const std::string text = OpenAndAnswer(run, &refreshed);
    EXPECT_TRUE(refreshed.ok()) << refreshed.ToString();
    return text.substr(text.find('\n'));  // all but the worker line (file bytes)
  };
  bool layouts = false;
  const std::string level4 = answers(4, &layouts);
  EXPECT_TRUE(layouts);
  EXPECT_NE(level4.find("series ok"), std::string::npos);
  for (int level : {0, 1, 6}) {
    SCOPED_TRACE(level);
    EXPECT_EQ(answers(level, &layouts), level4);
    EXPECT_EQ(layouts, level != 0);
  }
}

// A frame larger than the reader's first piece of the catalog (1 MiB: here
// a registry of 20,000 tensors with 100-byte names) is read whole, and so
// are the frames after it.
TEST(CatalogWriterTest, FramesLargerThanAReadPieceAreRead) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  auto writer = OpenWriterOrDie(run);
  ASSERT_NE(writer, nullptr);
  std::vector<TensorInfo> tensors;
  for (std::uint32_t id = 0; id < 20000; ++id) {
    std::string name = "layer" + std::to_string(id) + "/";
    name.resize(100, 'w');
    tensors.push_back(MakeTensorInfo(id, name));
  }
  TSTAT_ASSERT_OK(writer->RegisterTensors(tensors));
  for (std::int64_t g = 0; g < 3; ++g) {
    StepBatch batch = MakeBatch(g);
    batch.stats.push_back(SyntheticStatsRecord(g, static_cast<std::uint32_t>(g)));
    TSTAT_ASSERT_OK(writer->Write(batch));
    TSTAT_ASSERT_OK(writer->Flush({}));
  }
  TSTAT_ASSERT_OK(writer->Close({}));
  const std::string worker = run + "/" + WorkerDirName(0) + "/";
  ASSERT_GT(FileSize(worker + kCatalogFileName).value(), std::uint64_t{2} << 20);
  // Every segment replaced by zeros of its size: what opens came from the
  // catalog.
  for (std::int64_t seg = 0; seg < 3; ++seg) {
    const std::string path = worker + SegmentFileName(seg);
    WriteFile(path, std::string(FileSize(path).value(), '\0'));
  }
  auto trial = Trial::Open(run);
  TSTAT_ASSERT_OK(trial);
  TSTAT_EXPECT_OK((*trial)->Refresh());
  EXPECT_EQ((*trial)->steps().size(), 3u);
  EXPECT_EQ((*trial)->tensor_names().size(), 20000u);
}

// Segments of several stats chunks (50 tensors x 40 steps: 2,000 rows in
// chunks of 414, some tensors across two chunks): every tensor's series read
// through the catalog's layout equals the one read from the segments, and
// the writer ends a segment by itself once it holds
// GroupedStatsTable::kRotateRows stats rows.
TEST(CatalogWriterTest, SeriesAcrossChunksAndSegmentsEndedByRowCount) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  auto writer = OpenWriterOrDie(run);
  ASSERT_NE(writer, nullptr);
  TSTAT_ASSERT_OK(writer->RegisterTensors(NumberedTensors(50)));
  for (std::int64_t g = 0; g < 80; ++g) {
    StepBatch batch = MakeBatch(g, Mode::kTrain, g);
    for (std::uint32_t t = 0; t < 50; ++t) batch.stats.push_back(SyntheticStatsRecord(g, t));
    TSTAT_ASSERT_OK(writer->Write(batch));
    if (g % 40 == 39) TSTAT_ASSERT_OK(writer->Flush({}));
  }
  TSTAT_ASSERT_OK(writer->Close({}));
  const std::string catalog = run + "/" + WorkerDirName(0) + "/" + kCatalogFileName;
  auto bytes = ReadWholeFile(catalog);
  TSTAT_ASSERT_OK(bytes);
  const CatalogFrames frames =
      DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size());
  ASSERT_EQ(frames.entries.size(), 2u);
  ASSERT_TRUE(frames.entries[0].stats_layout.has_value());
  EXPECT_EQ(frames.entries[0].stats_layout->chunks.size(), 5u);
  EXPECT_EQ(frames.entries[0].stats_layout->tensors.size(), 1u);  // one run of 50
  const auto all_series = [&]() {
    auto trial = Trial::Open(run);
    EXPECT_TRUE(trial.ok());
    std::vector<std::vector<SeriesPoint>> out;
    for (std::uint32_t t = 0; t < 50; ++t) {
      auto series = (*trial)->series("w" + std::to_string(t), StatField::kMax, Mode::kTrain);
      EXPECT_TRUE(series.ok()) << series.status().ToString();
      out.push_back(series.ok() ? *series : std::vector<SeriesPoint>());
    }
    return out;
  };
  const std::vector<std::vector<SeriesPoint>> through_layout = all_series();
  TSTAT_ASSERT_OK(RemoveFile(catalog));
  const std::vector<std::vector<SeriesPoint>> from_segments = all_series();
  for (std::uint32_t t = 0; t < 50; ++t) {
    ASSERT_EQ(through_layout[t].size(), 80u) << t;
    ASSERT_EQ(from_segments[t].size(), 80u) << t;
    for (std::size_t i = 0; i < 80; ++i) {
      EXPECT_EQ(through_layout[t][i].step.global_step, static_cast<std::int64_t>(i));
      EXPECT_EQ(through_layout[t][i].value, from_segments[t][i].value) << t << " " << i;
      EXPECT_EQ(through_layout[t][i].value,
                SyntheticStatsRecord(static_cast<std::int64_t>(i), t).stats.max);
    }
  }

  // 1,100 tensors x 500 steps without a flush: 550,000 rows, past 524,288.
  TempDir big_dir;
  auto big = OpenWriterOrDie(big_dir.Sub("run"));
  ASSERT_NE(big, nullptr);
  TSTAT_ASSERT_OK(big->RegisterTensors(NumberedTensors(1100)));
  std::uint64_t rows = 0;
  for (std::int64_t g = 0; g < 500; ++g) {
    StepBatch batch = MakeBatch(g);
    for (std::uint32_t t = 0; t < 1100; ++t) batch.stats.push_back(SyntheticStatsRecord(g, t));
    TSTAT_ASSERT_OK(big->Write(batch));
    rows += 1100;
    EXPECT_EQ(big->segments_written(), rows >= GroupedStatsTable::kRotateRows ? 1u : 0u) << g;
  }
  TSTAT_ASSERT_OK(big->Close({}));
  EXPECT_EQ(big->segments_written(), 2u);
}

TEST(CatalogWriterTest, AFileNamedCatalogIsLeftAloneAndTheRunReads) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  const std::string worker = run + "/" + WorkerDirName(0);
  TSTAT_ASSERT_OK(MakeDirs(worker));
  WriteFile(worker + "/" + kCatalogFileName, "not a catalog");
  auto writer = OpenWriterOrDie(run);
  ASSERT_NE(writer, nullptr);
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "a")}));
  for (std::int64_t g = 0; g < 4; ++g) {
    StepBatch batch = MakeBatch(g);
    batch.stats.push_back(ReferenceRecord(g, 0, false));
    TSTAT_ASSERT_OK(writer->Write(batch));
    TSTAT_ASSERT_OK(writer->Flush({}));
  }
  TSTAT_ASSERT_OK(writer->Close({}));
  EXPECT_FALSE(writer->catalog_error().ok());
  EXPECT_NE(writer->catalog_error().message().find("catalog"), std::string::npos)
      << writer->catalog_error().ToString();
  EXPECT_EQ(ReadWholeFile(worker + "/" + kCatalogFileName).value(), "not a catalog");
  auto trial = Trial::Open(run);
  TSTAT_ASSERT_OK(trial);
  TSTAT_EXPECT_OK((*trial)->Refresh());
  auto series = (*trial)->series("a", StatField::kMean);
  TSTAT_ASSERT_OK(series);
  EXPECT_EQ(series->size(), 4u);
}

}  // namespace
}  // namespace tstat::io::testing
