// A count array written a chunk at a time, narrowed (io/streamed_counts.h):
// whatever the count -- one, either side of a chunk, several chunks and a
// tail -- and whatever the largest value, the array read back through HDF5
// holds exactly the counts appended, stored as the narrowest of uint16,
// uint32 and uint64 that holds them, with the chunking of a whole write. In
// the writer: a step with a count wider than the segment's fixed width ends
// the segment before it, and every histogram of both segments reads back.
#include "io/write/streamed_counts.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/format/segment_schema.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_lock.h"
#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io {
namespace {

using testing::ExpectRecordEqual;
using testing::MakeBatch;
using testing::NumberedTensors;
using testing::OpenWriterOrDie;
using testing::SyntheticStatsRecord;
using testing::TempDir;

// Deterministic counts in [0, max]; the last is max itself.
std::vector<std::uint64_t> Counts(std::uint64_t n, std::uint64_t max) {
  std::vector<std::uint64_t> v(n);
  std::uint64_t x = 88172645463325252ull;
  for (std::uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = max == UINT64_MAX ? x : x % (max + 1);
  }
  if (n) v[n - 1] = max;
  return v;
}

struct Stored {
  std::size_t type_bytes = 0;
  H5D_layout_t layout = H5D_LAYOUT_ERROR;
  hsize_t chunk = 0;
  hsize_t max_dims = 0;
  std::vector<std::uint64_t> values;
};

Stored ReadStored(hid_t file, const std::string& path) {
  Stored out;
  H5DataSet ds(H5Dopen2(file, kExpHistCounts, H5P_DEFAULT));
  EXPECT_TRUE(ds.valid());
  if (!ds.valid()) return out;
  H5Type type(H5Dget_type(ds.get()));
  out.type_bytes = H5Tget_size(type.get());
  EXPECT_EQ(H5Tget_sign(type.get()), H5T_SGN_NONE);
  H5Plist dcpl(H5Dget_create_plist(ds.get()));
  out.layout = H5Pget_layout(dcpl.get());
  if (out.layout == H5D_CHUNKED) H5Pget_chunk(dcpl.get(), 1, &out.chunk);
  H5Space space(H5Dget_space(ds.get()));
  hsize_t dims[1] = {0};
  H5Sget_simple_extent_dims(space.get(), dims, &out.max_dims);
  out.values.resize(dims[0]);
  EXPECT_TRUE(ReadH5Dataset(ds.get(), H5T_NATIVE_UINT64, out.values.data(), path).ok());
  return out;
}

TEST(StreamedCountsTest, WidthIsTheNarrowestThatHolds) {
  EXPECT_EQ(CountWidthBytes(0), 2);
  EXPECT_EQ(CountWidthBytes(65535), 2);
  EXPECT_EQ(CountWidthBytes(65536), 4);
  EXPECT_EQ(CountWidthBytes(0xffffffffull), 4);
  EXPECT_EQ(CountWidthBytes(0x100000000ull), 8);
}

TEST(StreamedCountsTest, ReadsBackExactlyAtEveryCountWidthAndLevel) {
  TempDir dir;
  ChunkDeflater deflater;
  struct Width {
    std::uint64_t max;
    std::size_t bytes;
  };
  for (const Width w : {Width{1000, 2}, Width{70000, 4}, Width{UINT64_MAX, 8}}) {
    const std::uint64_t C = kChunkBytes / w.bytes;
    for (int level : {0, 4}) {
      for (std::uint64_t n : {std::uint64_t{1}, C - 1, C, C + 1, 3 * C + 5}) {
        if (level == 0 && n != C + 1) continue;  // level 0 never streams
        SCOPED_TRACE(std::to_string(n) + " counts up to " + std::to_string(w.max) + " at level " +
                     std::to_string(level));
        const std::string path = dir.Sub("c.h5");
        const std::vector<std::uint64_t> counts = Counts(n, w.max);
        H5Lock lock;
        H5File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
        ASSERT_TRUE(file.valid());
        StreamedCounts array(kExpHistCounts);
        array.Reset(level);
        // Appended in uneven pieces (a histogram's counts at a time).
        for (std::uint64_t i = 0; i < n;) {
          const std::uint64_t piece = std::min<std::uint64_t>(1 + i % 37, n - i);
          TSTAT_ASSERT_OK(array.Append(file.get(), counts.data() + i, piece, &deflater, path));
          i += piece;
          ASSERT_EQ(array.size(), i);
        }
        // The width is fixed, and the chunks are in the file, once one is full.
        const bool streamed = level > 0 && n >= C;
        EXPECT_EQ(array.width_bytes(), streamed ? static_cast<int>(w.bytes) : 0);
        EXPECT_EQ(H5Lexists(file.get(), kExpHistCounts, H5P_DEFAULT) > 0, streamed);
        TSTAT_ASSERT_OK(array.Finish(file.get(), &deflater, path));
        EXPECT_EQ(H5Fget_obj_count(file.get(), H5F_OBJ_DATASET), 0);

        const Stored got = ReadStored(file.get(), path);
        EXPECT_EQ(got.type_bytes, w.bytes);
        ASSERT_EQ(got.values.size(), n);
        EXPECT_TRUE(got.values == counts);
        // Ranges (ReadTableRange, a lone step's histogram bins): the slice,
        // across chunk boundaries too; past the end, an error naming it.
        for (const auto& [begin, count] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                 {0, n},
                 {n / 2, n - n / 2},
                 {std::min(C - 1, n - 1), std::min<std::uint64_t>(3, n - std::min(C - 1, n - 1))},
                 {n - 1, 1},
                 {n, 0}}) {
          std::vector<std::uint64_t> range;
          TSTAT_ASSERT_OK(ReadTableRange(
              file.get(), kExpHistCounts, H5T_NATIVE_UINT64, sizeof(std::uint64_t), begin, count,
              [&range](std::size_t k) -> void* {
                range.assign(k, 0);
                return range.data();
              },
              path));
          EXPECT_TRUE(range == std::vector<std::uint64_t>(counts.begin() + begin,
                                                          counts.begin() + begin + count))
              << "rows " << begin << " + " << count;
        }
        const Status past = ReadTableRange(
            file.get(), kExpHistCounts, H5T_NATIVE_UINT64, sizeof(std::uint64_t), n - 1, 2,
            [](std::size_t) -> void* { return nullptr; }, path);
        EXPECT_EQ(past.code(), StatusCode::kCorruption) << past.ToString();
        if (n * w.bytes <= kCompactBytes) {
          EXPECT_EQ(got.layout, H5D_COMPACT);
        } else if (level == 0) {
          EXPECT_EQ(got.layout, H5D_CONTIGUOUS);
        } else {
          EXPECT_EQ(got.layout, H5D_CHUNKED);
          EXPECT_EQ(got.chunk, n > C ? C : n);
          EXPECT_EQ(got.max_dims, streamed ? H5S_UNLIMITED : n);
        }
      }
    }
  }
}

// Once the width is fixed, a wider count does not fit: Fits says so and
// Append refuses it by name; Close drops the array and Reset starts again.
TEST(StreamedCountsTest, AWiderCountAfterTheWidthIsFixedIsRefused) {
  TempDir dir;
  ChunkDeflater deflater;
  const std::string path = dir.Sub("wide.h5");
  H5Lock lock;
  H5File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  StreamedCounts array(kExpHistCounts);
  array.Reset(4);
  EXPECT_TRUE(array.Fits(UINT64_MAX));  // nothing fixed yet
  const std::vector<std::uint64_t> small = Counts(kChunkBytes / 2, 60000);
  TSTAT_ASSERT_OK(array.Append(file.get(), small.data(), small.size(), &deflater, path));
  ASSERT_EQ(array.width_bytes(), 2);
  EXPECT_TRUE(array.Fits(65535));
  EXPECT_FALSE(array.Fits(65536));
  const std::uint64_t wide = 65536;
  const Status s = array.Append(file.get(), &wide, 1, &deflater, path);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("'exp_hist_counts'"), std::string::npos) << s.message();
  EXPECT_EQ(array.size(), small.size());
  array.Close();
  EXPECT_EQ(array.size(), 0u);
  EXPECT_EQ(H5Fget_obj_count(file.get(), H5F_OBJ_DATASET), 0);
  array.Reset(4);
  EXPECT_TRUE(array.Fits(UINT64_MAX));
}

// Through the writer: 1,000 tensors of 30 bins fix uint16 counts within the
// first segment; a step holding a count of 70,000 then ends that segment
// before it, the next segment stores uint32 counts, and every record of
// every step reads back exactly.
TEST(StreamedCountsTest, WriterEndsTheSegmentBeforeAWiderCount) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  constexpr std::uint32_t kTensors = 1000;
  TSTAT_ASSERT_OK(writer->RegisterTensors(NumberedTensors(kTensors)));
  auto record = [](std::int64_t step, std::uint32_t t) {
    TensorStatsRecord r = SyntheticStatsRecord(step, t);
    ExponentBins bins;
    bins.first_bin = 100 + static_cast<int>(t % 50);
    for (int b = 0; b < 30; ++b) bins.counts.push_back(1 + (step * 31 + t * 7 + b) % 60000);
    if (step == 20 && t == 500) bins.counts[3] = 70000;
    r.exponent_histogram = bins;
    return r;
  };
  // 30,000 counts a step: the uint16 chunk (524,288) fills at step 17.
  constexpr std::int64_t kSteps = 25;
  for (std::int64_t step = 0; step < kSteps; ++step) {
    StepBatch b = MakeBatch(step);
    for (std::uint32_t t = 0; t < kTensors; ++t) b.stats.push_back(record(step, t));
    TSTAT_ASSERT_OK(writer->Write(b));
  }
  TSTAT_ASSERT_OK(writer->Close({}));
  EXPECT_EQ(writer->records_lost(), 0u);

  // Two segments: steps 0-19 with uint16 counts, 20-24 with uint32.
  const std::vector<std::pair<std::string, std::size_t>> segments = {{"seg-000000000000.h5", 2},
                                                                     {"seg-000000000001.h5", 4}};
  for (const auto& [name, bytes] : segments) {
    const std::string path = dir.Sub("worker-00000/" + name);
    H5Lock lock;
    H5File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_TRUE(file.valid()) << path;
    EXPECT_EQ(ReadStored(file.get(), path).type_bytes, bytes) << name;
  }
  EXPECT_FALSE(PathExists(dir.Sub("worker-00000/seg-000000000002.h5")));
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  ASSERT_EQ((*trial)->steps().size(), static_cast<std::size_t>(kSteps));
  for (std::int64_t step = 0; step < kSteps; ++step) {
    for (std::uint32_t t : {0u, 499u, 500u, 999u}) {
      auto got = (*trial)->record("w" + std::to_string(t), step);
      TSTAT_ASSERT_OK(got);
      ExpectRecordEqual(*got, record(step, t),
                        "w" + std::to_string(t) + " at step " + std::to_string(step));
    }
  }
}

}  // namespace
}  // namespace tstat::io
