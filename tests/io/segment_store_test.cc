// SegmentStore (io/segment_store.h) against a model: a byte vector to which
// every write is applied in order. Raw-data writes of 64 KiB and more go to
// disk, the rest to memory; whatever the mix and overlap, reads and the
// finished file must equal the model, and the seal's CRC must be zlib's CRC-32
// of the model's bytes [512, length).
#include "io/h5/segment_store.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "io/h5/segment_seal.h"
#include "tests/io/io_test_util.h"

namespace tstat::io::testing {
namespace {

constexpr std::size_t kBig = SegmentStore::kDirectWriteBytes;

struct Model {
  std::vector<std::uint8_t> bytes;
  void Write(std::uint64_t offset, const std::vector<std::uint8_t>& data) {
    if (bytes.size() < offset + data.size()) bytes.resize(offset + data.size(), 0);
    std::memcpy(bytes.data() + offset, data.data(), data.size());
  }
};

std::vector<std::uint8_t> Pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

std::vector<std::uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void WriteBoth(SegmentStore* store, Model* model, bool raw, std::uint64_t offset,
               const std::vector<std::uint8_t>& data) {
  ASSERT_TRUE(store->Write(raw, offset, data.size(), data.data())) << store->error().ToString();
  model->Write(offset, data);
}

std::vector<std::uint8_t> ReadAll(SegmentStore* store, std::uint64_t n) {
  std::vector<std::uint8_t> out(n, 0xAB);
  EXPECT_TRUE(store->Read(0, n, out.data())) << store->error().ToString();
  return out;
}

// The finished file: the model with the seal in front and zeros up to `size`.
void ExpectFinishedFileMatches(const std::string& path, const Model& model, std::uint64_t size) {
  std::vector<std::uint8_t> want = model.bytes;
  want.resize(size, 0);
  const std::vector<std::uint8_t> got = ReadFile(path);
  ASSERT_EQ(got.size(), size);
  EXPECT_TRUE(
      std::equal(got.begin() + kSegmentUserBlock, got.end(), want.begin() + kSegmentUserBlock))
      << "file bytes differ from the model";
  const auto crc = static_cast<std::uint32_t>(
      crc32(0, want.data() + kSegmentUserBlock, static_cast<uInt>(size - kSegmentUserBlock)));
  EXPECT_EQ(std::string(got.begin(), got.begin() + kSegmentUserBlock),
            SegmentSealHeader(size, crc));
  TSTAT_EXPECT_OK(VerifySegmentSeal(path));
}

// A store on a new file in a temporary directory, and its model.
class SegmentStoreFileTest : public ::testing::Test {
 protected:
  void SetUp() override { TSTAT_ASSERT_OK(store.Create(path)); }
  TempDir dir;
  const std::string path = dir.Sub("seg.h5.tmp");
  SegmentStore store;
  Model model;
};

TEST_F(SegmentStoreFileTest, LargeRawWritesGoToDiskTheRestToMemory) {
  WriteBoth(&store, &model, false, 512, Pattern(3000, 1));         // metadata
  WriteBoth(&store, &model, true, 4096, Pattern(kBig - 1, 2));     // small raw: memory
  WriteBoth(&store, &model, true, 4096 + kBig, Pattern(kBig, 3));  // large raw: disk
  WriteBoth(&store, &model, false, 4096 + 3 * kBig, Pattern(100, 4));
  EXPECT_EQ(store.direct_bytes(), kBig);
  // Only the disk part is in the file before Finish.
  EXPECT_EQ(ReadFile(path).size(), 4096 + 2 * kBig);
  EXPECT_EQ(store.end_of_file(), 4096 + 3 * kBig + 100);
  EXPECT_EQ(ReadAll(&store, model.bytes.size()), model.bytes);
  const std::uint64_t size = model.bytes.size() + 1000;  // allocated past the last write
  TSTAT_ASSERT_OK(store.Finish(size, kSegmentUserBlock));
  ExpectFinishedFileMatches(path, model, size);
}

TEST_F(SegmentStoreFileTest, OverlappingWritesKeepTheLatestBytesWhereverTheyLive) {
  WriteBoth(&store, &model, true, 1024, Pattern(4 * kBig, 10));              // disk [1024, 1024+4k)
  WriteBoth(&store, &model, false, 1024 + kBig, Pattern(100, 11));           // memory inside it
  WriteBoth(&store, &model, false, 1024 + 4 * kBig - 50, Pattern(100, 12));  // across its end
  WriteBoth(&store, &model, true, 1024 + 2 * kBig, Pattern(kBig, 13));       // disk again
  WriteBoth(&store, &model, false, 600, Pattern(500, 14));                   // across its start
  EXPECT_EQ(ReadAll(&store, model.bytes.size()), model.bytes);
  // A read in the middle, crossing memory/disk boundaries.
  std::vector<std::uint8_t> part(kBig + 200);
  ASSERT_TRUE(store.Read(1024 + kBig - 100, part.size(), part.data()));
  EXPECT_TRUE(std::equal(part.begin(), part.end(), model.bytes.begin() + 1024 + kBig - 100));
  TSTAT_ASSERT_OK(store.Finish(model.bytes.size(), kSegmentUserBlock));
  ExpectFinishedFileMatches(path, model, model.bytes.size());
}

// The seal's CRC combines the CRCs taken at write time; what was overwritten
// since, or lies partly in the user block, is read back instead. Each case
// must give zlib's CRC of the final bytes (checked by ExpectFinishedFileMatches).
TEST_F(SegmentStoreFileTest, SealCrcCoversRewrittenAndClippedDirectWrites) {
  WriteBoth(&store, &model, true, 100, Pattern(kBig, 20));              // starts in the user block
  WriteBoth(&store, &model, true, 100 + kBig, Pattern(kBig, 21));       // adjoining: one disk range
  WriteBoth(&store, &model, true, 100 + kBig + 10, Pattern(kBig, 22));  // rewrites most of it
  WriteBoth(&store, &model, true, 100 + 3 * kBig, Pattern(kBig, 23));
  WriteBoth(&store, &model, false, 100 + 3 * kBig + 7, Pattern(1, 24));  // one byte in memory
  WriteBoth(&store, &model, true, 100 + 3 * kBig, Pattern(kBig, 25));    // the same range again
  TSTAT_ASSERT_OK(store.Finish(model.bytes.size(), kSegmentUserBlock));
  ExpectFinishedFileMatches(path, model, model.bytes.size());
}

TEST(SegmentStoreTest, RandomWriteSequencesMatchTheModel) {
  std::mt19937 rng(20261122);
  for (int round = 0; round < 20; ++round) {
    TempDir dir;
    const std::string path = dir.Sub("seg.h5.tmp");
    SegmentStore store;
    TSTAT_ASSERT_OK(store.Create(path));
    Model model;
    model.bytes.resize(kSegmentUserBlock, 0);
    for (int w = 0; w < 40; ++w) {
      const bool raw = rng() % 2;
      const std::size_t size = rng() % 3 == 0 ? kBig + rng() % (2 * kBig) : 1 + rng() % 5000;
      const std::uint64_t offset = kSegmentUserBlock + rng() % (6 * kBig);
      WriteBoth(&store, &model, raw, offset, Pattern(size, static_cast<std::uint32_t>(rng())));
    }
    ASSERT_EQ(ReadAll(&store, model.bytes.size()), model.bytes) << "round " << round;
    const std::uint64_t size = model.bytes.size() + rng() % 3000;
    TSTAT_ASSERT_OK(store.Finish(size, kSegmentUserBlock));
    ExpectFinishedFileMatches(path, model, size);
  }
}

TEST(SegmentStoreTest, AFailedDiskWriteIsReportedAndLaterWritesStillSucceed) {
  // /dev/full: writes fail with ENOSPC, reads return zeros.
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full";
  SegmentStore store;
  TSTAT_ASSERT_OK(store.Create("/dev/full"));
  const std::vector<std::uint8_t> big = Pattern(kBig, 20);
  EXPECT_FALSE(store.Write(true, 4096, big.size(), big.data()));
  EXPECT_EQ(store.error().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(store.error().message().find("/dev/full: write: No space left on device"),
            std::string::npos)
      << store.error().message();
  // The segment is lost, but HDF5 must still be able to close the file: every
  // later write, large raw ones too, lands in memory.
  EXPECT_TRUE(store.Write(true, 8192, big.size(), big.data()));
  EXPECT_TRUE(store.Write(false, 512, 10, big.data()));
  std::vector<std::uint8_t> back(big.size());
  ASSERT_TRUE(store.Read(8192, back.size(), back.data()));
  EXPECT_EQ(back, big);
  const Status finished = store.Finish(8192 + kBig, kSegmentUserBlock);
  EXPECT_EQ(finished.code(), StatusCode::kResourceExhausted) << finished.ToString();
}

TEST(SegmentStoreTest, CreateInAMissingDirectoryNamesThePath) {
  SegmentStore store;
  const Status s = store.Create("/nonexistent-tstat-dir/seg.h5.tmp");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);  // io/posix_file.h's errno mapping
  EXPECT_NE(s.message().find("/nonexistent-tstat-dir/seg.h5.tmp: create: No such file"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace tstat::io::testing
