// Damaged runs: a segment truncated at many offsets, bytes overwritten at
// many offsets (a stats chunk read through the catalog included), garbage
// appended, hostile files named like segments, a damaged CLOSED marker, a
// missing segment. Each damaged segment gives kCorruption naming the file
// (never a crash) and the rest of the run stays readable and correct.
// Crafted contents behind valid seals: crafted_segment_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>

#include "io/format/segment_catalog.h"
#include "io/format/segment_schema.h"
#include "io/h5/posix_file.h"
#include "io/h5/segment_seal.h"
#include "io/read/segment_reader.h"
#include "tests/io/corruption_fixture.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

TEST_F(CorruptionTest, IntactRunReadsCleanly) {
  auto trial = Trial::Open(dir_.path());
  TSTAT_ASSERT_OK(trial);
  TSTAT_EXPECT_OK((*trial)->Refresh());
  EXPECT_EQ((*trial)->steps().size(), 12u);
  TSTAT_EXPECT_OK(VerifySegmentSeal(bad_path_));
}

TEST_F(CorruptionTest, TruncatedAtManyOffsets) {
  const std::size_t size = original_.size();
  std::set<std::size_t> offsets = {0,    1,    100,      511,      512,        513,      520,
                                   1024, 2048, size / 3, size / 2, size - 513, size - 8, size - 1};
  for (std::size_t o = 0; o < size; o += size / 40) offsets.insert(o);
  for (std::size_t offset : offsets) {
    WriteFile(bad_path_, original_.substr(0, offset));
    const Status direct = ReadSegment(bad_path_).status();
    EXPECT_EQ(direct.code(), StatusCode::kCorruption) << offset << ": " << direct.ToString();
    ExpectRestReadable("truncated to " + std::to_string(offset));
  }
}

TEST_F(CorruptionTest, BytesOverwrittenAtManyOffsets) {
  const std::size_t size = original_.size();
  std::set<std::size_t> offsets = {0, 5, 15, 20, 30, 40, 100, 300, 511, 512, 513, 600, size - 1};
  std::mt19937_64 rng(1234);
  while (offsets.size() < 80) offsets.insert(rng() % size);
  for (std::size_t offset : offsets) {
    std::string damaged = original_;
    damaged[offset] = static_cast<char>(damaged[offset] ^ 0x5A);
    WriteFile(bad_path_, damaged);
    const Status direct = ReadSegment(bad_path_).status();
    EXPECT_EQ(direct.code(), StatusCode::kCorruption) << offset << ": " << direct.ToString();
  }
  // The full Trial check on a sample (each opens the whole run). A run opens
  // from its catalog without reading the segments, so the damage shows when
  // the records are read; without the catalog, when the run is opened.
  const std::string catalog = dir_.Sub("worker-00000/catalog");
  TSTAT_ASSERT_OK(ReadWholeFile(catalog));
  for (std::size_t offset : {std::size_t{7}, std::size_t{600}, size / 2, size - 1}) {
    std::string damaged = original_;
    damaged[offset] = static_cast<char>(damaged[offset] ^ 0x01);
    WriteFile(bad_path_, damaged);
    ExpectRecordsRefused("byte " + std::to_string(offset) + " changed, catalog", "",
                         Stats::kEither);
  }
  TSTAT_ASSERT_OK(RemoveFile(catalog));
  for (std::size_t offset : {std::size_t{7}, std::size_t{600}, size / 2, size - 1}) {
    std::string damaged = original_;
    damaged[offset] = static_cast<char>(damaged[offset] ^ 0x01);
    WriteFile(bad_path_, damaged);
    ExpectRestReadable("byte " + std::to_string(offset) + " changed");
  }
}

// Opened from the catalog, a series reads the chunks that hold its rows and
// checks each against its CRC: a byte changed inside one fails the series
// naming the segment and the chunk; a byte changed elsewhere in the file
// leaves the series whole (what it read is intact).
TEST_F(CorruptionTest, SeriesChecksTheStatsChunksItReads) {
  auto catalog = ReadWholeFile(dir_.Sub("worker-00000/catalog"));
  TSTAT_ASSERT_OK(catalog);
  CatalogFrames frames =
      DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(catalog->data()), catalog->size());
  ASSERT_EQ(frames.entries.size(), 3u);
  ASSERT_TRUE(frames.entries[1].stats_layout.has_value());
  const StatsLayout& layout = *frames.entries[1].stats_layout;
  ASSERT_EQ(layout.chunks.size(), 1u);  // 8 rows
  const StatsChunk& chunk = layout.chunks[0];
  for (std::uint64_t at : {chunk.offset, chunk.offset + chunk.stored_bytes / 2,
                           chunk.offset + chunk.stored_bytes - 1}) {
    std::string damaged = original_;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    WriteFile(bad_path_, damaged);
    auto trial = Trial::Open(dir_.path());
    TSTAT_ASSERT_OK(trial);
    const Status s = (*trial)->series("a", StatField::kMean).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << at << ": " << s.ToString();
    EXPECT_NE(s.message().find(kBadSegment), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("stats chunk 0 fails its CRC"), std::string::npos) << s.message();
  }
  for (std::uint64_t at :
       {std::uint64_t{600}, chunk.offset - 1, chunk.offset + chunk.stored_bytes}) {
    std::string damaged = original_;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    WriteFile(bad_path_, damaged);
    auto trial = Trial::Open(dir_.path());
    TSTAT_ASSERT_OK(trial);
    auto series = (*trial)->series("a", StatField::kMean);
    ASSERT_TRUE(series.ok()) << at << ": " << series.status().ToString();
    ASSERT_EQ(series->size(), 12u);
    for (std::int64_t g = 0; g < 12; ++g) {
      EXPECT_EQ((*series)[g].value, ReferenceRecord(g, 0, true).stats.mean) << at;
    }
    // The segment's other records are still refused (its seal fails).
    EXPECT_EQ((*trial)->record("a", 5).status().code(), StatusCode::kCorruption) << at;
  }
}

TEST_F(CorruptionTest, ExtendedFile) {
  WriteFile(bad_path_, original_ + std::string(100, '\0'));
  EXPECT_NE(ReadSegment(bad_path_).status().message().find("extended"), std::string::npos);
  ExpectRestReadable("extended");
}

// Behind the seal: a truncated file resealed as if it were whole reaches the
// HDF5 parser, which must fail cleanly too (kCorruption, no crash).
TEST_F(CorruptionTest, TruncatedAndResealedFailsInsideHdf5Cleanly) {
  const std::size_t size = original_.size();
  for (std::size_t offset : {std::size_t{600}, std::size_t{1024}, size / 4, size / 2, size * 3 / 4,
                             size - 100, size - 1}) {
    std::vector<std::uint8_t> image(original_.begin(), original_.begin() + offset);
    SealSegmentImage(&image);
    WriteFile(bad_path_, std::string(image.begin(), image.end()));
    TSTAT_EXPECT_OK(VerifySegmentSeal(bad_path_));
    const Status read = ReadSegment(bad_path_).status();
    EXPECT_EQ(read.code(), StatusCode::kCorruption) << offset << ": " << read.ToString();
    EXPECT_NE(read.message().find(kBadSegment), std::string::npos) << read.message();
  }
}

TEST_F(CorruptionTest, NotASegment) {
  WriteFile(bad_path_, "");
  ExpectRestReadable("empty file");
  WriteFile(bad_path_, std::string(4096, 'x'));
  ExpectRestReadable("garbage");
}

// A segment that is a FIFO, a link to /dev/zero, a directory, a symlink
// loop, a huge sparse file or empty is skipped, named, never blocks, and the
// rest of the run reads.
TEST_F(CorruptionTest, HostileSegmentFilesAreSkipped) {
  for (const std::string& kind : HostileFileKinds()) {
    std::filesystem::remove_all(bad_path_);
    ASSERT_TRUE(MakeHostileFile(bad_path_, kind)) << kind;
    const auto t0 = std::chrono::steady_clock::now();
    ExpectRestReadable(kind);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << kind;
  }
}

// A segment copied under another number would give its rows twice: it is
// skipped and named, and every step is there once.
TEST_F(CorruptionTest, CopiedSegmentIsSkippedNotDuplicated) {
  const std::string copy = dir_.Sub("worker-00000/seg-000000000007.h5");
  WriteFile(copy, original_);
  auto trial = Trial::Open(dir_.path());
  TSTAT_ASSERT_OK(trial);
  const Status refreshed = (*trial)->Refresh();
  EXPECT_EQ(refreshed.code(), StatusCode::kCorruption) << refreshed.ToString();
  EXPECT_NE(refreshed.message().find("seg-000000000007.h5: holds segment 1"), std::string::npos)
      << refreshed.message();
  EXPECT_EQ((*trial)->steps().size(), 12u);
  auto series = (*trial)->tensor_names();
  EXPECT_EQ(series.size(), 2u);
}

TEST_F(CorruptionTest, DamagedClosedMarker) {
  WriteFile(dir_.Sub("worker-00000/CLOSED"), "{\"format\": \"tstat-run\", \"rank\": ");
  auto trial = Trial::Open(dir_.path());
  TSTAT_ASSERT_OK(trial);
  const Status refreshed = (*trial)->Refresh();
  EXPECT_EQ(refreshed.code(), StatusCode::kCorruption);
  EXPECT_NE(refreshed.message().find("CLOSED"), std::string::npos) << refreshed.message();
  EXPECT_EQ((*trial)->steps().size(), 12u);
  EXPECT_TRUE((*trial)->loaded_all_steps());  // the marker exists: the writer finished
}

// A CLOSED marker that is a FIFO, a link to /dev/zero, a directory, a
// symlink loop or a huge file is reported (naming it), never blocks or is
// read whole, and the run's segments stay readable.
TEST_F(CorruptionTest, HostileClosedMarkerIsReportedNotRead) {
  for (const std::string& kind : HostileFileKinds()) {
    SCOPED_TRACE(kind);
    const std::string marker = dir_.Sub("worker-00000/CLOSED");
    std::filesystem::remove_all(marker);
    ASSERT_TRUE(MakeHostileFile(marker, kind));
    const auto t0 = std::chrono::steady_clock::now();
    auto trial = Trial::Open(dir_.path());
    TSTAT_ASSERT_OK(trial);
    const Status refreshed = (*trial)->Refresh();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    EXPECT_FALSE(refreshed.ok());
    EXPECT_NE(refreshed.message().find("CLOSED"), std::string::npos) << refreshed.message();
    EXPECT_EQ((*trial)->steps().size(), 12u);
  }
}

// A CLOSED that is a link to nothing is no marker yet; the worker's segments
// are read all the same.
TEST_F(CorruptionTest, DanglingClosedLinkIsNoMarkerAndTheSegmentsRead) {
  const std::string marker = dir_.Sub("worker-00000/CLOSED");
  std::filesystem::remove(marker);
  ASSERT_EQ(::symlink(dir_.Sub("nowhere").c_str(), marker.c_str()), 0);
  auto trial = Trial::Open(dir_.path());
  TSTAT_ASSERT_OK(trial);
  TSTAT_EXPECT_OK((*trial)->Refresh());
  EXPECT_EQ((*trial)->steps().size(), 12u);
  EXPECT_FALSE((*trial)->loaded_all_steps());
}

TEST_F(CorruptionTest, MissingSegmentIsReported) {
  TSTAT_ASSERT_OK(RemoveFile(bad_path_));
  auto trial = Trial::Open(dir_.path());
  TSTAT_ASSERT_OK(trial);
  const Status refreshed = (*trial)->Refresh();
  EXPECT_EQ(refreshed.code(), StatusCode::kCorruption);
  EXPECT_NE(refreshed.message().find("CLOSED records 3 segments but only 2 exist"),
            std::string::npos)
      << refreshed.message();
  EXPECT_EQ((*trial)->steps().size(), 8u);
}

// Opens the sealed segment `path` for writing, lets `edit` change the file,
// the rows of its raw_index and its raw_shapes, writes both back and reseals
// the file.
TEST(ClosedMarkerVersionTest, Version1IsReadAndAnUnknownVersionIsReported) {
  for (const char* version : {"1", "5"}) {
    SCOPED_TRACE(std::string("format_version ") + version);
    TempDir dir;
    {
      auto writer = OpenWriterOrDie(dir.path());
      ASSERT_NE(writer, nullptr);
      TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "a", {})}));
      TSTAT_ASSERT_OK(writer->Write(MakeBatch(0)));
      TSTAT_ASSERT_OK(writer->Close({}));
    }
    const std::string marker = dir.Sub("worker-00000/CLOSED");
    auto text = ReadWholeFile(marker);
    TSTAT_ASSERT_OK(text);
    const std::string current = "\"format_version\": " + std::to_string(kFormatVersion) + ",";
    const std::size_t at = text->find(current);
    ASSERT_NE(at, std::string::npos) << *text;
    WriteFile(marker, text->replace(at, current.size(),
                                    std::string("\"format_version\": ") + version + ","));

    auto trial = Trial::Open(dir.path());
    TSTAT_ASSERT_OK(trial);
    const Status refreshed = (*trial)->Refresh();
    if (std::string(version) == "1") {
      TSTAT_EXPECT_OK(refreshed);
      ASSERT_EQ((*trial)->workers().size(), 1u);
      EXPECT_TRUE((*trial)->workers()[0].closed);
      EXPECT_EQ((*trial)->workers()[0].format_version, kFormatVersion);  // its segment's
      EXPECT_TRUE((*trial)->loaded_all_steps());
    } else {
      ASSERT_FALSE(refreshed.ok());
      EXPECT_NE(refreshed.message().find("CLOSED marker of format_version '5'"), std::string::npos)
          << refreshed.message();
      EXPECT_NE(refreshed.message().find(marker), std::string::npos) << refreshed.message();
    }
  }
}

}  // namespace
}  // namespace tstat::io::testing
