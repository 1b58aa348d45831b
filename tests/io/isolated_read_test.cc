// TrialOptions::isolate_segment_reads: a segment whose HDF5 metadata makes
// libhdf5 1.10.8 itself crash (a message flagged shared, found by the
// segment_reader fuzzer; h5py crashes on it too) is skipped with an error
// naming it and the signal, and the process goes on; ordinary segments read
// the same with and without isolation.
#include "io/read/isolated_read.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "io/format/run_layout.h"
#include "io/format/segment_catalog.h"
#include "io/h5/posix_file.h"
#include "io/h5/segment_seal.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

// The HDF5 part of the crafted segment (tests/io/data/), sealed as a segment
// of rank 0 of a run under `run`.
void PlantCraftedSegment(const std::string& run, std::int64_t index) {
  auto data =
      ReadRegularFile(std::string(TSTAT_TEST_DATA) + "/crash-libhdf5-shared-message.h5", 1 << 20);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  std::vector<std::uint8_t> image(kSegmentUserBlock + data->size(), 0);
  std::copy(data->begin(), data->end(), image.begin() + kSegmentUserBlock);
  SealSegmentImage(&image);
  std::ofstream out(run + "/" + WorkerDirName(0) + "/" + SegmentFileName(index), std::ios::binary);
  out.write(reinterpret_cast<const char*>(image.data()),
            static_cast<std::streamsize>(image.size()));
  ASSERT_TRUE(out.good());
}

// A run of tensor "w" with one segment per step, steps 0 .. steps - 1.
void WriteSegments(const std::string& run, std::int64_t steps) {
  auto writer = OpenWriterOrDie(run);
  ASSERT_NE(writer, nullptr);
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
  for (std::int64_t g = 0; g < steps; ++g) {
    StepBatch b = MakeBatch(g);
    b.stats.push_back(SyntheticStatsRecord(g, 0));
    TSTAT_ASSERT_OK(writer->Write(b));
    TSTAT_ASSERT_OK(writer->Flush({}));
  }
}

TEST(IsolatedReadTest, SegmentThatCrashesLibhdf5IsSkippedAndTheRestReads) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  WriteSegments(run, 3);
  // Without isolation, the good segments read the same as with it.
  auto plain = Trial::Open(run);
  TSTAT_ASSERT_OK(plain);
  auto expected = (*plain)->series("w", StatField::kMean);
  TSTAT_ASSERT_OK(expected);
  ASSERT_EQ(expected->size(), 3u);

  PlantCraftedSegment(run, 7);
  TrialOptions options;
  options.isolate_segment_reads = true;
  auto trial = Trial::Open(run, options);
  TSTAT_ASSERT_OK(trial);
  const Status refreshed = (*trial)->Refresh();
  ASSERT_EQ(refreshed.code(), StatusCode::kCorruption) << refreshed.ToString();
  EXPECT_NE(refreshed.message().find(SegmentFileName(7)), std::string::npos) << refreshed.message();
  EXPECT_NE(refreshed.message().find("child process"), std::string::npos) << refreshed.message();
  auto isolated = (*trial)->series("w", StatField::kMean);
  TSTAT_ASSERT_OK(isolated);
  ASSERT_EQ(isolated->size(), expected->size());
  for (std::size_t i = 0; i < isolated->size(); ++i) {
    EXPECT_EQ((*isolated)[i].step.global_step, (*expected)[i].step.global_step);
    EXPECT_EQ((*isolated)[i].value, (*expected)[i].value);
  }
}

// A run opened from its worker catalog has not shown its segments to HDF5:
// with isolation, each is parsed by the child before the first read of its
// records or raw snapshots, so a segment planted with the catalog's byte
// count for it fails that read with an error naming it, and the process and
// the other segments carry on.
TEST(IsolatedReadTest, CatalogedSegmentsAreParsedInTheChildBeforeTheirFirstRead) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  WriteSegments(run, 3);
  PlantCraftedSegment(run, 1);
  const std::string worker = run + "/" + WorkerDirName(0) + "/";
  auto catalog = ReadWholeFile(worker + kCatalogFileName);
  TSTAT_ASSERT_OK(catalog);
  CatalogFrames frames =
      DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(catalog->data()), catalog->size());
  ASSERT_EQ(frames.entries.size(), 3u);
  frames.entries[1].file_bytes = FileSize(worker + SegmentFileName(1)).value();
  std::string rewritten;
  for (const CatalogEntry& e : frames.entries) TSTAT_ASSERT_OK(EncodeCatalogFrame(e, &rewritten));
  std::ofstream(worker + kCatalogFileName, std::ios::binary | std::ios::trunc) << rewritten;

  TrialOptions options;
  options.isolate_segment_reads = true;
  auto trial = Trial::Open(run, options);
  TSTAT_ASSERT_OK(trial);
  TSTAT_EXPECT_OK((*trial)->Refresh());  // from the catalog: nothing parsed yet
  EXPECT_EQ((*trial)->steps().size(), 3u);
  TSTAT_EXPECT_OK((*trial)->record("w", 0).status());
  for (int attempt = 0; attempt < 2; ++attempt) {  // refused again, not parsed again
    const Status crashed = (*trial)->record("w", 1).status();
    EXPECT_EQ(crashed.code(), StatusCode::kCorruption) << crashed.ToString();
    EXPECT_NE(crashed.message().find(SegmentFileName(1)), std::string::npos) << crashed.message();
    EXPECT_NE(crashed.message().find("child process"), std::string::npos) << crashed.message();
  }
  TSTAT_EXPECT_OK((*trial)->record("w", 2).status());
  EXPECT_EQ((*trial)->series("w", StatField::kMean).status().code(), StatusCode::kCorruption);
}

// One child reads every segment (it is forked once, while the reader is
// small); a segment that ends it is reported, and the next check starts a
// new child that reads on.
TEST(IsolatedReadTest, OneChildServesTheChecksAndIsReplacedWhenItDies) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  WriteSegments(run, 4);
  PlantCraftedSegment(run, 7);
  const std::string worker = run + "/" + WorkerDirName(0) + "/";
  IsolatedSegmentReads reads(60.0);
  for (std::int64_t seg : {0, 1, 2}) TSTAT_EXPECT_OK(reads.Check(worker + SegmentFileName(seg)));
  EXPECT_EQ(reads.children_started(), 1);
  // A file the reader refuses is read to its error by the child: OK here.
  TSTAT_EXPECT_OK(reads.Check(worker + "no-such-segment.h5"));
  const Status crashed = reads.Check(worker + SegmentFileName(7));
  EXPECT_EQ(crashed.code(), StatusCode::kCorruption) << crashed.ToString();
  // A signal, or a sanitizer's exit code in sanitizer builds.
  EXPECT_NE(crashed.message().find("child process"), std::string::npos) << crashed.message();
  TSTAT_EXPECT_OK(reads.Check(worker + SegmentFileName(3)));
  EXPECT_EQ(reads.children_started(), 2);
}

// Two readers in one process (two Trials of a notebook): the second's child
// is forked while the first's socket is open. Each child keeps only its own
// socket, and ending a reader ends its child at once (it once waited for an
// end of file the other child's inherited socket held back, for ever).
TEST(IsolatedReadTest, ReadersInOneProcessEndTheirOwnChildrenWhateverTheOrder) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  WriteSegments(run, 2);
  const std::string segment = run + "/" + WorkerDirName(0) + "/" + SegmentFileName(0);
  auto first = std::make_unique<IsolatedSegmentReads>(60.0);
  TSTAT_ASSERT_OK(first->Check(segment));
  auto second = std::make_unique<IsolatedSegmentReads>(60.0);
  TSTAT_ASSERT_OK(second->Check(segment));
  auto ended = std::async(std::launch::async, [&first] { first.reset(); });
  ASSERT_EQ(ended.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "ending the first reader waits on its child";
  TSTAT_EXPECT_OK(second->Check(segment));  // the second's child still serves
  second.reset();
}

}  // namespace
}  // namespace tstat::io::testing
