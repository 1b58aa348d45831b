// ReadSegmentMetadata with a RegistryMemo (io/read/segment_reader.h) takes a
// segment's registry from the memo only when it is stored byte for byte as
// the one decoded last: segments that repeat it hit, a segment that adds a
// tensor or changes a shape is decoded, and every segment's registry reads
// exactly as without the memo.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/format/run_layout.h"
#include "io/read/segment_reader.h"
#include "tests/io/io_test_util.h"

namespace tstat::io::testing {
namespace {

void ExpectSameRegistry(const std::vector<TensorInfo>& a, const std::vector<TensorInfo>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].shape, b[i].shape);
    EXPECT_EQ(a[i].collections, b[i].collections);
  }
}

TEST(RegistryMemoTest, HitsOnlyOnTheSameStoredRegistry) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  auto writer = OpenWriterOrDie(run);
  TensorInfo a = MakeTensorInfo(0, "a");
  TensorInfo b = MakeTensorInfo(1, "b");
  ASSERT_TRUE(writer->RegisterTensors({a}).ok());
  // Segments 0 and 1: {a}; 2: {a, b}; 3: {a, b} with b's shape changed.
  for (std::int64_t g = 0; g < 4; ++g) {
    if (g == 2) {
      ASSERT_TRUE(writer->RegisterTensors({b}).ok());
    }
    if (g == 3) {
      b.shape = {7, 3};
      ASSERT_TRUE(writer->RegisterTensors({b}).ok());
    }
    StepBatch batch = MakeBatch(g, Mode::kTrain);
    batch.stats.push_back(ReferenceRecord(g, 0, false));
    ASSERT_TRUE(writer->Write(batch).ok());
    ASSERT_TRUE(writer->Flush({}).ok());
  }
  ASSERT_TRUE(writer->Close({}).ok());

  RegistryMemo memo;
  const std::uint64_t want_hits[] = {0, 1, 1, 1};
  for (std::int64_t seg = 0; seg < 4; ++seg) {
    SCOPED_TRACE(seg);
    const std::string path = run + "/" + WorkerDirName(0) + "/" + SegmentFileName(seg);
    auto plain = ReadSegmentMetadata(path);
    auto memoized = ReadSegmentMetadata(path, &memo);
    TSTAT_ASSERT_OK(plain);
    TSTAT_ASSERT_OK(memoized);
    ExpectSameRegistry(memoized->tensors, plain->tensors);
    EXPECT_EQ(memo.hits, want_hits[seg]);
  }
  auto last = ReadSegmentMetadata(run + "/" + WorkerDirName(0) + "/" + SegmentFileName(3), &memo);
  TSTAT_ASSERT_OK(last);
  ASSERT_EQ(last->tensors.size(), 2u);
  EXPECT_EQ(last->tensors[1].shape, (std::vector<std::int64_t>{7, 3}));
  EXPECT_EQ(memo.hits, 2u);  // the same segment again
}

}  // namespace
}  // namespace tstat::io::testing
