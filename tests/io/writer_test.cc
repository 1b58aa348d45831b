// Hdf5RunWriter behaviour: refusing to overwrite, empty flushes, caller
// errors, abandoned segments, unusual raw shapes, h5dump, and failures of the
// disk (a full tmpfs, a read-only remount, RLIMIT_FSIZE): every failure is a
// Status naming the file, the failed segment's records are counted lost, and
// the writer keeps working.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "io/format/segment_schema.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_file.h"
#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

StepBatch StatsBatch(std::int64_t g) {
  StepBatch b = MakeBatch(g);
  b.stats.push_back(SyntheticStatsRecord(g, 0));
  return b;
}

RawSnapshot FloatRaw(std::uint32_t id, std::vector<std::int64_t> shape, std::size_t numel,
                     float base) {
  std::vector<std::uint8_t> bytes(numel * 4);
  for (std::size_t i = 0; i < numel; ++i) {
    const float v = base + static_cast<float>(i % 1000) * 0.5f + static_cast<float>(i / 1000);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  RawSnapshot r;
  r.tensor_id = id;
  r.dtype = DType::kFloat32;
  r.shape = std::move(shape);
  r.bytes = SharedBytes(std::move(bytes));
  return r;
}

std::vector<std::string> Files(const std::string& dir) {
  auto names = ListDir(dir);
  EXPECT_TRUE(names.ok()) << names.status().ToString();
  std::vector<std::string> out = names.ok() ? names.value() : std::vector<std::string>{};
  std::sort(out.begin(), out.end());
  return out;
}

Hdf5RunWriterOptions Options(const std::string& run, int rank = 0, int world = 1) {
  Hdf5RunWriterOptions o;
  o.info.run_dir = run;
  o.info.rank = rank;
  o.info.world_size = world;
  return o;
}

TEST(WriterTest, RefusesToOverwriteARun) {
  TempDir dir;
  {
    auto writer = OpenWriterOrDie(dir.path());
    TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
    TSTAT_ASSERT_OK(writer->Write(StatsBatch(0)));
    TSTAT_ASSERT_OK(writer->Close({}));
  }
  auto again = OpenHdf5RunWriter(Options(dir.path()));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find(dir.Sub("worker-00000")), std::string::npos)
      << again.status().message();
  // Another rank of the same run is fine.
  TSTAT_EXPECT_OK(OpenHdf5RunWriter(Options(dir.path(), 1, 2)));
  // A leftover .tmp of a crashed writer, or a lone CLOSED, also refuses.
  for (const char* leftover : {"seg-000000000003.h5.tmp", "CLOSED"}) {
    TempDir other;
    TSTAT_ASSERT_OK(MakeDirs(other.Sub("worker-00000")));
    std::ofstream(other.Sub(std::string("worker-00000/") + leftover)) << "x";
    EXPECT_EQ(OpenHdf5RunWriter(Options(other.path())).status().code(),
              StatusCode::kFailedPrecondition)
        << leftover;
  }
  // An empty worker directory is not data.
  TempDir empty;
  TSTAT_ASSERT_OK(MakeDirs(empty.Sub("worker-00000")));
  TSTAT_EXPECT_OK(OpenHdf5RunWriter(Options(empty.path())));
  EXPECT_EQ(OpenHdf5RunWriter(Options(empty.path(), 2, 2)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(WriterTest, EmptyFlushWritesNothing) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
  TSTAT_ASSERT_OK(writer->Flush({}));
  EXPECT_TRUE(Files(dir.Sub("worker-00000")).empty());
  TSTAT_ASSERT_OK(writer->Write(StatsBatch(0)));
  TSTAT_ASSERT_OK(writer->Flush({}));
  TSTAT_ASSERT_OK(writer->Flush({}));
  TSTAT_ASSERT_OK(writer->Flush({}));
  EXPECT_EQ(Files(dir.Sub("worker-00000")),
            (std::vector<std::string>{"catalog", "seg-000000000000.h5"}));
  EXPECT_EQ(writer->segments_written(), 1u);
  TSTAT_ASSERT_OK(writer->Close({}));
  EXPECT_EQ(Files(dir.Sub("worker-00000")),
            (std::vector<std::string>{"CLOSED", "catalog", "seg-000000000000.h5"}));
  EXPECT_EQ(writer->bytes_written(), FileSize(dir.Sub("worker-00000/seg-000000000000.h5")).value());
}

TEST(WriterTest, CallerErrorsLeaveTheSegmentIntact) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w"), MakeTensorInfo(1, "r")}));
  TSTAT_ASSERT_OK(writer->Write(StatsBatch(5)));
  EXPECT_EQ(writer->Write(StatsBatch(5)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Write(StatsBatch(4)).code(), StatusCode::kFailedPrecondition);
  StepBatch bad_raw = StatsBatch(6);
  bad_raw.raws.push_back(FloatRaw(1, {3, 5}, 14, 0.f));  // 14 elements, shape says 15
  EXPECT_EQ(writer->Write(bad_raw).code(), StatusCode::kInvalidArgument);
  // A hostile shape whose element count wraps around 2^64 to the bytes given
  // (2^40 x 2^30 x 4 bytes = 2^72: 0 mod 2^64, and no bytes).
  StepBatch wrapping = StatsBatch(6);
  wrapping.raws.push_back(FloatRaw(1, {std::int64_t{1} << 40, std::int64_t{1} << 30}, 0, 0.f));
  const Status wrapped = writer->Write(wrapping);
  EXPECT_EQ(wrapped.code(), StatusCode::kInvalidArgument) << wrapped.ToString();
  EXPECT_NE(wrapped.message().find("2^64"), std::string::npos) << wrapped.message();
  StepBatch bad_sample = StatsBatch(6);
  bad_sample.stats[0].sample = ElementSample{{1, 2}, {0.5}};
  EXPECT_EQ(writer->Write(bad_sample).code(), StatusCode::kInvalidArgument);
  // Exponent bins reaching past the 279 bins of the layout.
  StepBatch bad_bins = StatsBatch(6);
  bad_bins.stats[0].exponent_histogram = ExponentBins{};
  bad_bins.stats[0].exponent_histogram->first_bin = kExpHistBins - 2;
  bad_bins.stats[0].exponent_histogram->counts = {1, 2, 3};
  const Status bins = writer->Write(bad_bins);
  EXPECT_EQ(bins.code(), StatusCode::kInvalidArgument) << bins.ToString();
  EXPECT_NE(bins.message().find("bins 277 + 3 lie outside [0, 279)"), std::string::npos)
      << bins.message();
  bad_bins.stats[0].exponent_histogram->first_bin = -1;
  bad_bins.stats[0].exponent_histogram->counts = {1};
  EXPECT_EQ(writer->Write(bad_bins).code(), StatusCode::kInvalidArgument);
  StepBatch bad_mode = StatsBatch(6);
  bad_mode.key.mode = static_cast<Mode>(9);
  EXPECT_EQ(writer->Write(bad_mode).code(), StatusCode::kInvalidArgument);
  TSTAT_ASSERT_OK(writer->Write(StatsBatch(6)));
  TSTAT_ASSERT_OK(writer->Close({}));
  EXPECT_EQ(writer->records_lost(), 0u);
  EXPECT_EQ(writer->Write(StatsBatch(7)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Flush({}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Close({}).code(), StatusCode::kFailedPrecondition);
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  std::vector<StepKey> steps = (*trial)->steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].global_step, 5);
  EXPECT_EQ(steps[1].global_step, 6);
}

// Records and raw snapshots of ids never declared are refused, for ids both
// below and above the writer's dense lookup (kDenseIds = 2^20).
TEST(WriterTest, UndeclaredIdsAreRefusedAtAnyMagnitude) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  const std::uint32_t big = (1u << 20) + 5;
  TSTAT_ASSERT_OK(
      writer->RegisterTensors({MakeTensorInfo(3, "small"), MakeTensorInfo(big, "big")}));
  for (std::uint32_t id : {0u, 2u, 4u, big - 1, big + 1, 0xffffffffu}) {
    StepBatch b = MakeBatch(1);
    b.stats.push_back(SyntheticStatsRecord(1, id));
    const Status s = writer->Write(b);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << id;
    EXPECT_NE(s.message().find("tensor id " + std::to_string(id) + " was never declared"),
              std::string::npos)
        << s.message();
    StepBatch r = MakeBatch(1);
    r.raws.push_back(FloatRaw(id, {2}, 2, 0.f));
    EXPECT_EQ(writer->Write(r).code(), StatusCode::kInvalidArgument) << id;
  }
  StepBatch ok = MakeBatch(1);
  ok.stats.push_back(SyntheticStatsRecord(1, 3));
  ok.stats.push_back(SyntheticStatsRecord(1, big));
  TSTAT_ASSERT_OK(writer->Write(ok));
  TSTAT_ASSERT_OK(writer->Close({}));
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  TSTAT_ASSERT_OK((*trial)->stats("big", 1));
  TSTAT_ASSERT_OK((*trial)->stats("small", 1));
}

// Hand-built exponent bins may carry zero bins at either end, or none at
// all: the file keeps the non-zero range, and the reader returns equal bins.
TEST(WriterTest, ExponentBinsAreStoredTrimmed) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w"), MakeTensorInfo(1, "z")}));
  StepBatch b = StatsBatch(1);
  b.stats[0].exponent_histogram = ExponentBins{};
  b.stats[0].exponent_histogram->first_bin = 140;
  b.stats[0].exponent_histogram->counts = {0, 0, 7, 0, 9, 0};
  TensorStatsRecord all_zero = SyntheticStatsRecord(1, 1);
  all_zero.exponent_histogram = ExponentBins{};
  all_zero.exponent_histogram->first_bin = 3;
  all_zero.exponent_histogram->counts = {0, 0};
  b.stats.push_back(all_zero);
  TSTAT_ASSERT_OK(writer->Write(b));
  TSTAT_ASSERT_OK(writer->Close({}));

  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  auto w = (*trial)->record("w", 1);
  TSTAT_ASSERT_OK(w);
  ASSERT_TRUE(w->exponent_histogram.has_value());
  EXPECT_EQ(w->exponent_histogram->first_bin, 142);
  EXPECT_EQ(w->exponent_histogram->counts, (std::vector<std::uint64_t>{7, 0, 9}));
  EXPECT_EQ(w->exponent_histogram->Expand().counts[144], 9u);
  EXPECT_EQ(w->exponent_histogram->total(), 16u);
  auto z = (*trial)->record("z", 1);
  TSTAT_ASSERT_OK(z);
  ASSERT_TRUE(z->exponent_histogram.has_value());  // present, and empty
  EXPECT_TRUE(z->exponent_histogram->counts.empty());
  EXPECT_EQ(z->exponent_histogram->total(), 0u);
}

// Count arrays are stored in the narrowest of uint16/32/64 that holds the
// segment's largest count; the reader widens them back.
TEST(WriterTest, CountArraysAreStoredInTheNarrowestWidth) {
  struct Case {
    std::uint64_t largest;
    std::size_t bytes;
  };
  for (const Case c : {Case{0, 2}, Case{65535, 2}, Case{65536, 4}, Case{0xFFFFFFFFu, 4},
                       Case{std::uint64_t{1} << 32, 8}, Case{~std::uint64_t{0}, 8}}) {
    SCOPED_TRACE("largest count " + std::to_string(c.largest));
    TempDir dir;
    auto writer = OpenWriterOrDie(dir.path());
    TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
    StepBatch b = StatsBatch(1);
    b.stats[0].exponent_histogram = ExponentBins{};
    b.stats[0].exponent_histogram->first_bin = 100;
    b.stats[0].exponent_histogram->counts = {3, c.largest, 1};
    b.stats[0].label_counts = LabelCounts{};
    b.stats[0].label_counts->counts = {c.largest, 0, 7};
    TSTAT_ASSERT_OK(writer->Write(b));
    TSTAT_ASSERT_OK(writer->Close({}));

    auto file = OpenH5FileReadOnly(dir.Sub("worker-00000/seg-000000000000.h5"));
    TSTAT_ASSERT_OK(file);
    for (const char* name : {kExpHistCounts, kLabelCounts}) {
      auto dataset = OpenH5Dataset(file->get(), name, name);
      TSTAT_ASSERT_OK(dataset);
      H5Type stored(H5Dget_type(dataset->get()));
      EXPECT_EQ(H5Tget_class(stored.get()), H5T_INTEGER) << name;
      EXPECT_EQ(H5Tget_sign(stored.get()), H5T_SGN_NONE) << name;
      EXPECT_EQ(H5Tget_size(stored.get()), c.bytes) << name;
    }
    auto trial = Trial::Open(dir.path());
    TSTAT_ASSERT_OK(trial);
    auto w = (*trial)->record("w", 1);
    TSTAT_ASSERT_OK(w);
    ASSERT_TRUE(w->exponent_histogram.has_value());
    EXPECT_EQ(w->exponent_histogram->counts, (std::vector<std::uint64_t>{3, c.largest, 1}));
    ASSERT_TRUE(w->label_counts.has_value());
    EXPECT_EQ(w->label_counts->counts, (std::vector<std::uint64_t>{c.largest, 0, 7}));
  }
}

// The byte count of a raw shape, checked (io/segment_schema.h).
TEST(WriterTest, ShapeBytesRejectsNegativeAndOverflowingShapes) {
  EXPECT_EQ(ShapeBytes({}, 4), std::optional<std::uint64_t>(4));  // 0-d: one element
  EXPECT_EQ(ShapeBytes({3, 5}, 8), std::optional<std::uint64_t>(120));
  EXPECT_EQ(ShapeBytes({std::int64_t{1} << 40, std::int64_t{1} << 40, 0}, 4),
            std::optional<std::uint64_t>(0));  // a zero dimension: empty, not an overflow
  EXPECT_EQ(ShapeBytes({std::int64_t{1} << 31, std::int64_t{1} << 31}, 2),
            std::optional<std::uint64_t>(std::uint64_t{1} << 63));
  EXPECT_EQ(ShapeBytes({std::int64_t{1} << 31, std::int64_t{1} << 31}, 4), std::nullopt);  // 2^64
  EXPECT_EQ(ShapeBytes({2, -1}, 4), std::nullopt);
  EXPECT_EQ(ShapeBytes({INT64_MAX}, 1), std::optional<std::uint64_t>(INT64_MAX));
  EXPECT_EQ(ShapeBytes({INT64_MAX}, 2), std::optional<std::uint64_t>(std::uint64_t{INT64_MAX} * 2));
  EXPECT_EQ(ShapeBytes({INT64_MAX}, 4), std::nullopt);
}

TEST(WriterTest, DestroyedWithoutCloseDropsTheUnflushedSegment) {
  TempDir dir;
  {
    auto writer = OpenWriterOrDie(dir.path());
    TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
    TSTAT_ASSERT_OK(writer->Write(StatsBatch(0)));
    TSTAT_ASSERT_OK(writer->Flush({}));
    TSTAT_ASSERT_OK(writer->Write(StatsBatch(1)));
    // The open segment is a .tmp (raw data on disk, metadata in memory) until
    // its Flush seals and renames it.
    EXPECT_EQ(writer->TEST_open_segment_path(), dir.Sub("worker-00000/seg-000000000001.h5.tmp"));
    EXPECT_EQ(
        Files(dir.Sub("worker-00000")),
        (std::vector<std::string>{"catalog", "seg-000000000000.h5", "seg-000000000001.h5.tmp"}));
  }
  EXPECT_EQ(Files(dir.Sub("worker-00000")),
            (std::vector<std::string>{"catalog", "seg-000000000000.h5"}));
  EXPECT_EQ(OpenH5ObjectCount(), 0);
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  EXPECT_EQ((*trial)->steps().size(), 1u);
  EXPECT_FALSE((*trial)->loaded_all_steps());
  EXPECT_FALSE((*trial)->workers()[0].closed);
}

TEST(WriterTest, LargeSegmentsRotateOnWrite) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path(), 0, 1, "{}", 0);
  writer->set_rotate_bytes(1 << 20);
  TSTAT_ASSERT_OK(
      writer->RegisterTensors({MakeTensorInfo(0, "big", {}, DType::kFloat32, {131072})}));
  PipelineCounters counters;
  counters.steps_captured = 77;
  TSTAT_ASSERT_OK(writer->Flush(counters));  // nothing to write; remembered for rotation
  for (std::int64_t g = 0; g < 5; ++g) {     // 512 KiB each: a segment every second step
    StepBatch b = MakeBatch(g);
    b.raws.push_back(FloatRaw(0, {131072}, 131072, static_cast<float>(g)));
    TSTAT_ASSERT_OK(writer->Write(b));
  }
  EXPECT_EQ(writer->segments_written(), 2u);
  TSTAT_ASSERT_OK(writer->Close(counters));
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  EXPECT_EQ((*trial)->raw_steps("big").size(), 5u);
  EXPECT_EQ((*trial)->workers()[0].segments, 3);
  auto last = (*trial)->raw("big", 4);
  TSTAT_ASSERT_OK(last);
  EXPECT_EQ(last->bytes, FloatRaw(0, {131072}, 131072, 4.f).bytes.ToVector());
  EXPECT_EQ((*trial)->workers()[0].counters.steps_captured, 77u);
}

TEST(WriterTest, UnusualRawShapes) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  TSTAT_ASSERT_OK(
      writer->RegisterTensors({MakeTensorInfo(0, "scalar", {}, DType::kFloat32, {}),
                               MakeTensorInfo(1, "empty", {}, DType::kFloat32, {0, 5}),
                               MakeTensorInfo(2, "flat", {}, DType::kFloat32, {}),
                               MakeTensorInfo(3, "big", {}, DType::kFloat32, {4, 131072})}));
  StepBatch b = MakeBatch(0);
  b.raws = {FloatRaw(0, {}, 1, 3.f), FloatRaw(1, {0, 5}, 0, 0.f), FloatRaw(2, {}, 7, 1.f),
            FloatRaw(3, {4, 131072}, 4 * 131072, 2.f)};  // 2 MiB: several chunks
  TSTAT_ASSERT_OK(writer->Write(b));
  TSTAT_ASSERT_OK(writer->Close({}));
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  const char* names[] = {"scalar", "empty", "flat", "big"};
  for (int i = 0; i < 4; ++i) {
    auto raw = (*trial)->raw(names[i], 0);
    TSTAT_ASSERT_OK(raw);
    EXPECT_EQ(raw->shape, b.raws[i].shape) << names[i];
    EXPECT_EQ(raw->bytes, b.raws[i].bytes.ToVector()) << names[i];
  }
}

TEST(WriterTest, H5dumpReadsASegment) {
  if (std::system("command -v h5dump > /dev/null 2>&1") != 0) GTEST_SKIP() << "no h5dump";
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path());
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
  StepBatch b = StatsBatch(0);
  b.stats[0] = ReferenceRecord(0, 0, true);
  TSTAT_ASSERT_OK(writer->Write(b));
  TSTAT_ASSERT_OK(writer->Close({}));
  const std::string cmd = "h5dump -H " + dir.Sub("worker-00000/seg-000000000000.h5") + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  const int rc = ::pclose(pipe);
  EXPECT_EQ(rc, 0) << out;
  for (const char* want : {"DATASET \"stats\"", "DATASET \"exp_hist\"", "DATASET \"channels\"",
                           "H5T_IEEE_F64LE \"m2\"", "ATTRIBUTE \"format\""}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out.substr(0, 2000);
  }
}

// ---------------------------------------------------------------------------
// Disk failures.

// A tmpfs of `size` mounted on a fresh directory (needs CAP_SYS_ADMIN).
class Tmpfs {
 public:
  explicit Tmpfs(const std::string& size) : options_("size=" + size) {
    mounted_ = ::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, options_.c_str()) == 0;
  }
  ~Tmpfs() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& path() const { return dir_.path(); }
  bool Remount(bool read_only) {
    if (::mount("tmpfs", dir_.path().c_str(), "tmpfs", MS_REMOUNT | (read_only ? MS_RDONLY : 0),
                options_.c_str()) == 0) {
      return true;
    }
    ADD_FAILURE() << "remount: " << std::strerror(errno);
    return false;
  }

 private:
  TempDir dir_;
  std::string options_;
  bool mounted_ = false;
};

// Fills the file system of `path` (writes until ENOSPC).
void Fill(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::vector<char> block(4096, 'x');
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
  }
  std::fclose(f);
}

TEST(WriterTest, DiskFullLosesOnlyTheFailedSegment) {
  Tmpfs fs("256k");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (not root?)";
  const std::string run = fs.path() + "/run";
  {
    auto writer = OpenWriterOrDie(run);
    TSTAT_ASSERT_OK(writer->RegisterTensors(
        {MakeTensorInfo(0, "w"), MakeTensorInfo(1, "big", {}, DType::kFloat32, {16384})}));
    TSTAT_ASSERT_OK(writer->Write(StatsBatch(0)));
    TSTAT_ASSERT_OK(writer->Flush({}));
    Fill(fs.path() + "/filler");
    // Steps 1 and 2: a stats record and a 64 KiB raw each, on a full disk.
    Status failure;
    std::uint64_t attempted = 0;
    for (std::int64_t g = 1; g <= 2 && failure.ok(); ++g) {
      StepBatch b = StatsBatch(g);
      b.raws.push_back(FloatRaw(1, {16384}, 16384, static_cast<float>(g)));
      attempted += 2;
      failure = writer->Write(b);
    }
    if (failure.ok()) failure = writer->Flush({});
    ASSERT_FALSE(failure.ok());
    EXPECT_EQ(failure.code(), StatusCode::kResourceExhausted) << failure.ToString();
    EXPECT_NE(failure.message().find(run + "/worker-00000/seg-000000000001.h5.tmp"),
              std::string::npos)
        << failure.message();
    EXPECT_NE(failure.message().find("No space left on device"), std::string::npos)
        << failure.message();
    EXPECT_NE(failure.message().find(std::to_string(attempted) + " records lost"),
              std::string::npos)
        << failure.message();
    EXPECT_EQ(writer->records_lost(), attempted);
    std::cout << "disk full: " << failure.ToString() << "\n";
    // The failed segment left nothing behind.
    EXPECT_EQ(Files(run + "/worker-00000"),
              (std::vector<std::string>{"catalog", "seg-000000000000.h5"}));
    // Space comes back: the writer carries on with a fresh segment.
    TSTAT_ASSERT_OK(RemoveFile(fs.path() + "/filler"));
    TSTAT_ASSERT_OK(writer->Write(StatsBatch(3)));
    TSTAT_ASSERT_OK(writer->Close({}));
  }
  EXPECT_EQ(OpenH5ObjectCount(), 0);  // nothing leaked inside HDF5
  auto trial = Trial::Open(run);
  TSTAT_ASSERT_OK(trial);
  std::vector<StepKey> steps = (*trial)->steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].global_step, 0);
  EXPECT_EQ(steps[1].global_step, 3);
  ExpectRecordEqual((*trial)->record("w", 3).value(), SyntheticStatsRecord(3, 0), "after");
  EXPECT_EQ((*trial)->record("w", 1).status().code(), StatusCode::kStepUnavailable);
  EXPECT_TRUE((*trial)->loaded_all_steps());
}

TEST(WriterTest, ReadOnlyDirectoryIsReportedAndSurvived) {
  Tmpfs fs("4m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (not root?)";
  const std::string run = fs.path() + "/run";
  auto writer = OpenWriterOrDie(run);
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
  TSTAT_ASSERT_OK(writer->Write(StatsBatch(0)));
  TSTAT_ASSERT_OK(writer->Flush({}));
  // Read-only from the next segment on (a file system with a file open for
  // writing cannot be remounted read-only): the segment's .tmp cannot be
  // created, and the step that would have opened it is lost.
  ASSERT_TRUE(fs.Remount(true));
  const Status failure = writer->Write(StatsBatch(1));
  ASSERT_TRUE(fs.Remount(false));
  EXPECT_EQ(failure.code(), StatusCode::kIoError) << failure.ToString();
  EXPECT_NE(failure.message().find(run + "/worker-00000/seg-000000000001.h5.tmp"),
            std::string::npos)
      << failure.message();
  EXPECT_NE(failure.message().find("Read-only file system"), std::string::npos)
      << failure.message();
  EXPECT_NE(failure.message().find("1 records lost"), std::string::npos) << failure.message();
  std::cout << "read-only: " << failure.ToString() << "\n";
  EXPECT_EQ(writer->records_lost(), 1u);
  TSTAT_ASSERT_OK(writer->Write(StatsBatch(3)));
  TSTAT_ASSERT_OK(writer->Close({}));
  EXPECT_EQ(Files(run + "/worker-00000"),
            (std::vector<std::string>{"CLOSED", "catalog", "seg-000000000000.h5",
                                      "seg-000000000002.h5"}));
  auto trial = Trial::Open(run);
  TSTAT_ASSERT_OK(trial);
  std::vector<StepKey> steps = (*trial)->steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1].global_step, 3);
}

// Without privileges: RLIMIT_FSIZE makes writes past the limit fail (EFBIG).
TEST(WriterTest, FileSizeLimitFailsTheSegmentOnly) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path(), 0, 1, "{}", 0);
  TSTAT_ASSERT_OK(writer->RegisterTensors(
      {MakeTensorInfo(0, "w"), MakeTensorInfo(1, "big", {}, DType::kFloat32, {262144})}));
  TSTAT_ASSERT_OK(writer->Write(StatsBatch(0)));
  TSTAT_ASSERT_OK(writer->Flush({}));
  StepBatch big = StatsBatch(1);
  big.raws.push_back(FloatRaw(1, {262144}, 262144, 1.f));  // 1 MiB > the limit
  Status failure;
  {
    FileSizeLimit limit(256 * 1024);
    ASSERT_TRUE(limit.set());
    failure = writer->Write(big);
    if (failure.ok()) failure = writer->Flush({});
  }
  ASSERT_FALSE(failure.ok());
  std::cout << "file size limit: " << failure.ToString() << "\n";
  EXPECT_NE(failure.message().find("seg-000000000001.h5.tmp"), std::string::npos)
      << failure.message();
  EXPECT_NE(failure.message().find("2 records lost"), std::string::npos) << failure.message();
  TSTAT_ASSERT_OK(writer->Write(StatsBatch(2)));
  TSTAT_ASSERT_OK(writer->Close({}));
  EXPECT_EQ(Files(dir.Sub("worker-00000")),
            (std::vector<std::string>{"CLOSED", "catalog", "seg-000000000000.h5",
                                      "seg-000000000002.h5"}));
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  EXPECT_EQ((*trial)->steps().size(), 2u);
  EXPECT_EQ((*trial)->workers()[0].counters.segments_written, 2u);
  writer.reset();
  EXPECT_EQ(OpenH5ObjectCount(), 0);
}

// Small snapshots past 1 MiB go to the file a chunk at a time while the
// segment is open (io/packed_raw_dataset.h): a chunk write that fails fails
// the segment like any other write, and no HDF5 object is left open.
TEST(WriterTest, FileSizeLimitDuringPackedChunkWritesFailsTheSegmentOnly) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path(), 0, 1, "{}", 0);
  std::vector<TensorInfo> tensors = {MakeTensorInfo(0, "w")};
  for (std::uint32_t t = 1; t <= 40; ++t) {
    tensors.push_back(MakeTensorInfo(t, "s" + std::to_string(t), {}, DType::kFloat32, {15000}));
  }
  TSTAT_ASSERT_OK(writer->RegisterTensors(tensors));
  TSTAT_ASSERT_OK(writer->Write(StatsBatch(0)));
  TSTAT_ASSERT_OK(writer->Flush({}));
  StepBatch small = StatsBatch(1);  // 40 x 60,000 bytes: packed, 2.4 MB > the limit
  for (std::uint32_t t = 1; t <= 40; ++t) small.raws.push_back(FloatRaw(t, {15000}, 15000, 1.f));
  Status failure;
  {
    FileSizeLimit limit(256 * 1024);
    ASSERT_TRUE(limit.set());
    failure = writer->Write(small);
  }
  ASSERT_FALSE(failure.ok());
  std::cout << "file size limit, packed: " << failure.ToString() << "\n";
  EXPECT_NE(failure.message().find("seg-000000000001.h5.tmp"), std::string::npos)
      << failure.message();
  EXPECT_NE(failure.message().find("41 records lost"), std::string::npos) << failure.message();
  EXPECT_EQ(writer->records_lost(), 41u);
  // The writer goes on: a new segment, its own packed dataset from offset 0.
  StepBatch next = StatsBatch(2);
  for (std::uint32_t t = 1; t <= 40; ++t) next.raws.push_back(FloatRaw(t, {15000}, 15000, 2.f));
  TSTAT_ASSERT_OK(writer->Write(next));
  TSTAT_ASSERT_OK(writer->Close({}));
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  EXPECT_EQ((*trial)->steps().size(), 2u);
  auto raw = (*trial)->raw("s40", 2);
  TSTAT_ASSERT_OK(raw);
  EXPECT_EQ(raw->bytes, FloatRaw(40, {15000}, 15000, 2.f).bytes.ToVector());
  writer.reset();
  EXPECT_EQ(OpenH5ObjectCount(), 0);
}

// Destroyed with raw/packed open (past its first chunk): the segment is
// dropped as a crash would leave it, with no HDF5 object left open.
TEST(WriterTest, DestroyedWithAnOpenPackedDatasetLeavesNothingOpen) {
  TempDir dir;
  {
    auto writer = OpenWriterOrDie(dir.path());
    std::vector<TensorInfo> tensors;
    for (std::uint32_t t = 0; t < 30; ++t) {
      tensors.push_back(MakeTensorInfo(t, "s" + std::to_string(t), {}, DType::kFloat32, {15000}));
    }
    TSTAT_ASSERT_OK(writer->RegisterTensors(tensors));
    StepBatch b = MakeBatch(0);  // 1.8 MB of small snapshots: one chunk written
    for (std::uint32_t t = 0; t < 30; ++t) b.raws.push_back(FloatRaw(t, {15000}, 15000, 1.f));
    TSTAT_ASSERT_OK(writer->Write(b));
    EXPECT_GT(OpenH5ObjectCount(), 1);  // the file and raw/packed
  }
  EXPECT_EQ(OpenH5ObjectCount(), 0);
  EXPECT_TRUE(Files(dir.Sub("worker-00000")).empty());
}

}  // namespace
}  // namespace tstat::io::testing
