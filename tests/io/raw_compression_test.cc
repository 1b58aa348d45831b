// Raw snapshots at raw_compression_level 0 (contiguous, uncompressed) and 6
// (chunked, shuffle + deflate) read back bit-exact through Trial and through
// h5py, both a large one (its own dataset) and small ones (byte ranges of
// the segment's packed dataset, "raw/packed"): the first segment's packed
// bytes pass 1 MiB, so that dataset is written a chunk at a time
// (io/packed_raw_dataset.h), with snapshots straddling chunk boundaries; the
// second's stay under one chunk. tests/io/h5py_reads_raw_compression.py checks the
// values, the storage and filters of each dataset, and the seal with zlib.crc32. The level of the
// stats tables stays its own (compression_level).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "io/format/segment_schema.h"
#include "io/h5/h5_attribute.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_lock.h"
#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"
#include "tests/io/legacy_segment.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

constexpr std::int64_t kRows = 64, kCols = 4096;  // 1 MiB: a dataset of its own
constexpr std::int64_t kSteps = 6;
constexpr std::int64_t kSmallRows = 40, kSmallCols = 50;  // 16,000 bytes of f64: packed
// Steps 0..2 (the first segment) also hold kMedium snapshots of 60,000 bytes,
// tensor ids kMediumId0 + m: 7.2 MB of packed bytes, 6 chunks and a tail (and
// a raw_index larger than a compact dataset).
constexpr std::int64_t kMedium = 40, kMediumElements = 15000, kMediumSteps = 3;
constexpr std::uint32_t kMediumId0 = 10;

// The same formula as expected_medium() in h5py_reads_raw_compression.py.
std::vector<std::uint8_t> MediumRawBytes(std::int64_t m, std::int64_t g) {
  std::vector<std::uint8_t> bytes(kMediumElements * 4);
  for (std::int64_t i = 0; i < kMediumElements; ++i) {
    const float v = static_cast<float>((g * 7 + m) * 100000 + i);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  return bytes;
}

std::string MediumName(std::int64_t m) { return "m" + std::to_string(m); }

// The same formula as expected_small() in h5py_reads_raw_compression.py.
std::vector<std::uint8_t> SmallRawBytes(std::int64_t g) {
  std::vector<std::uint8_t> bytes(kSmallRows * kSmallCols * 8);
  for (std::int64_t i = 0; i < kSmallRows * kSmallCols; ++i) {
    const double v = static_cast<double>(g * 1000 + i) + 0.25;
    std::memcpy(bytes.data() + 8 * i, &v, 8);
  }
  return bytes;
}

// The same formula as expected() in h5py_reads_raw_compression.py.
std::vector<std::uint8_t> RawBytes(std::int64_t g) {
  std::vector<std::uint8_t> bytes(kRows * kCols * 4);
  for (std::int64_t i = 0; i < kRows * kCols; ++i) {
    const auto bits = static_cast<std::uint32_t>(((i * 2654435761ll + g * 97) % (1 << 23)) |
                                                 (((i + g) % 200 + 20) << 23));
    std::memcpy(bytes.data() + 4 * i, &bits, 4);
  }
  return bytes;
}

void WriteRun(const std::string& run, int raw_level) {
  Hdf5RunWriterOptions o;
  o.info.run_dir = run;
  o.compression_level = 4;
  o.raw_compression_level = raw_level;
  auto writer = Hdf5RunWriter::Open(o);
  TSTAT_ASSERT_OK(writer);
  std::vector<TensorInfo> tensors = {
      MakeTensorInfo(0, "w"), MakeTensorInfo(1, "big", {}, DType::kFloat32, {kRows, kCols}),
      MakeTensorInfo(2, "small", {}, DType::kFloat64, {kSmallRows, kSmallCols})};
  for (std::int64_t m = 0; m < kMedium; ++m) {
    tensors.push_back(MakeTensorInfo(kMediumId0 + static_cast<std::uint32_t>(m), MediumName(m), {},
                                     DType::kFloat32, {kMediumElements}));
  }
  TSTAT_ASSERT_OK((*writer)->RegisterTensors(tensors));
  for (std::int64_t g = 0; g < kSteps; ++g) {
    StepBatch b = MakeBatch(g);
    for (std::uint32_t t = 0; t < 2; ++t) b.stats.push_back(SyntheticStatsRecord(g, t));
    b.raws.push_back(MakeRawSnapshot(1, DType::kFloat32, {kRows, kCols}, RawBytes(g)));
    b.raws.push_back(
        MakeRawSnapshot(2, DType::kFloat64, {kSmallRows, kSmallCols}, SmallRawBytes(g)));
    for (std::int64_t m = 0; m < kMedium && g < kMediumSteps; ++m) {
      b.raws.push_back(MakeRawSnapshot(kMediumId0 + static_cast<std::uint32_t>(m), DType::kFloat32,
                                       {kMediumElements}, MediumRawBytes(m, g)));
    }
    TSTAT_ASSERT_OK((*writer)->Write(b));
    if (g % 3 == 2) TSTAT_ASSERT_OK((*writer)->Flush({}));  // two segments
  }
  TSTAT_ASSERT_OK((*writer)->Close({}));
}

void ExpectRawsBitExact(const std::string& run) {
  auto trial = Trial::Open(run);
  TSTAT_ASSERT_OK(trial);
  EXPECT_EQ((*trial)->raw_steps("big").size(), static_cast<std::size_t>(kSteps));
  for (std::int64_t g = 0; g < kSteps; ++g) {
    auto raw = (*trial)->raw("big", g);
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    EXPECT_EQ(raw->dtype, DType::kFloat32);
    EXPECT_EQ(raw->shape, (std::vector<std::int64_t>{kRows, kCols}));
    EXPECT_TRUE(raw->bytes == RawBytes(g)) << "step " << g;
    auto small = (*trial)->raw("small", g);
    ASSERT_TRUE(small.ok()) << small.status().ToString();
    EXPECT_EQ(small->dtype, DType::kFloat64);
    EXPECT_EQ(small->shape, (std::vector<std::int64_t>{kSmallRows, kSmallCols}));
    EXPECT_TRUE(small->bytes == SmallRawBytes(g)) << "step " << g;
  }
  for (std::int64_t m = 0; m < kMedium; ++m) {
    EXPECT_EQ((*trial)->raw_steps(MediumName(m)).size(), static_cast<std::size_t>(kMediumSteps));
    for (std::int64_t g = 0; g < kMediumSteps; ++g) {
      auto medium = (*trial)->raw(MediumName(m), g);
      ASSERT_TRUE(medium.ok()) << medium.status().ToString();
      EXPECT_EQ(medium->shape, (std::vector<std::int64_t>{kMediumElements}));
      EXPECT_TRUE(medium->bytes == MediumRawBytes(m, g)) << MediumName(m) << " step " << g;
    }
  }
}

TEST(RawCompressionTest, Level0And6ReadBackBitExactThroughTrialAndH5py) {
  TempDir dir;
  const std::string run0 = dir.Sub("raw0"), run6 = dir.Sub("raw6");
  WriteRun(run0, 0);
  WriteRun(run6, 6);
  ExpectRawsBitExact(run0);
  ExpectRawsBitExact(run6);
  // Deflate makes the level-6 run smaller: the level reached the raw datasets.
  auto size = [](const std::string& run) {
    std::uint64_t total = 0;
    for (const char* seg : {"seg-000000000000.h5", "seg-000000000001.h5"}) {
      auto s = FileSize(run + "/worker-00000/" + seg);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      total += s.ok() ? s.value() : 0;
    }
    return total;
  };
  EXPECT_GT(size(run0), static_cast<std::uint64_t>(kSteps * kRows * kCols * 4));
  EXPECT_LT(size(run6), size(run0));
  const std::string cmd = std::string("/usr/bin/python3 ") + TSTAT_H5PY_RAW_COMPRESSION + " '" +
                          run0 + "' '" + run6 + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// A format_version 1 segment (raw_index with variable-length `dataset` and
// `shape`, no raw_shapes), with and without the byte_offset/byte_count columns
// of version 1 files written before small snapshots were packed: rewritten
// so from a current segment, it still reads bit-exact when legacy segments
// are allowed, both its own-dataset
// snapshots and (with the byte columns) its packed ones, and workers() reports
// its version.
TEST(RawCompressionTest, FormatVersion1SegmentsStillRead) {
  for (const bool packed_columns : {false, true}) {
    SCOPED_TRACE(packed_columns ? "with byte columns" : "without byte columns");
    TempDir dir;
    const std::string run = dir.Sub("old");
    {
      Hdf5RunWriterOptions o;
      o.info.run_dir = run;
      auto writer = Hdf5RunWriter::Open(o);
      TSTAT_ASSERT_OK(writer);
      TSTAT_ASSERT_OK((*writer)->RegisterTensors(
          {MakeTensorInfo(1, "big", {}, DType::kFloat32, {kRows, kCols}),
           MakeTensorInfo(2, "small", {}, DType::kFloat64, {kSmallRows, kSmallCols})}));
      for (std::int64_t g = 0; g < 3; ++g) {
        StepBatch b = MakeBatch(g);
        b.raws.push_back(MakeRawSnapshot(1, DType::kFloat32, {kRows, kCols}, RawBytes(g)));
        if (packed_columns) {
          b.raws.push_back(
              MakeRawSnapshot(2, DType::kFloat64, {kSmallRows, kSmallCols}, SmallRawBytes(g)));
        }
        TSTAT_ASSERT_OK((*writer)->Write(b));
      }
      TSTAT_ASSERT_OK((*writer)->Close({}));
    }
    const std::string path = run + "/worker-00000/seg-000000000000.h5";
    TSTAT_ASSERT_OK(RewriteAsLegacySegment(path, 1, packed_columns));
    ScopedLegacySegments allow;

    auto trial = Trial::Open(run);
    TSTAT_ASSERT_OK(trial);
    for (std::int64_t g = 0; g < 3; ++g) {
      auto raw = (*trial)->raw("big", g);
      ASSERT_TRUE(raw.ok()) << raw.status().ToString();
      EXPECT_TRUE(raw->bytes == RawBytes(g)) << "step " << g;
      EXPECT_EQ(raw->shape, (std::vector<std::int64_t>{kRows, kCols}));
      if (packed_columns) {
        auto small = (*trial)->raw("small", g);
        ASSERT_TRUE(small.ok()) << small.status().ToString();
        EXPECT_TRUE(small->bytes == SmallRawBytes(g)) << "step " << g;
        EXPECT_EQ(small->shape, (std::vector<std::int64_t>{kSmallRows, kSmallCols}));
      }
    }
    ASSERT_EQ((*trial)->workers().size(), 1u);
    EXPECT_EQ((*trial)->workers()[0].format_version, 1);
  }
}

TEST(RawCompressionTest, WriterRejectsEitherLevelOutOfRangeNamingFieldAndValue) {
  TempDir dir;
  for (const bool raw : {false, true}) {
    for (int level : {-1, 10}) {
      Hdf5RunWriterOptions o;
      o.info.run_dir = dir.path();
      (raw ? o.raw_compression_level : o.compression_level) = level;
      auto writer = Hdf5RunWriter::Open(o);
      ASSERT_FALSE(writer.ok());
      EXPECT_EQ(writer.status().code(), StatusCode::kInvalidArgument);
      const std::string want = std::string(raw ? "raw_compression_level" : "compression_level") +
                               " must be 0..9, not " + std::to_string(level);
      EXPECT_EQ(writer.status().message().rfind(want, 0), 0u) << writer.status().message();
    }
  }
}

}  // namespace
}  // namespace tstat::io::testing
