// A table written a chunk at a time while it fills (io/streamed_table.h):
// whatever the row count -- one row, one either side of a chunk, whole
// chunks, several chunks and a tail -- the table read back through HDF5 holds
// exactly the rows appended, in order, with the layout docs/storage-format.md gives: a
// table that fills a chunk at level 1..9 is chunked and extendible (rows per
// chunk as a whole-written table of that size gets), a smaller one, and any
// at level 0, is the fixed-size dataset of a whole write. In the writer: the
// per-channel rows of wide layers are streamed too and read back exactly; a
// failing chunk write (stats or channels) counts every lost record once, and
// a writer destroyed with a table open leaves nothing open.
#include "io/write/streamed_table.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "io/format/segment_schema.h"
#include "io/h5/h5_attribute.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_lock.h"
#include "io/h5/h5_type.h"
#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io {
namespace {

using testing::ExpectStatsEqual;
using testing::FileSizeLimit;
using testing::MakeBatch;
using testing::NumberedTensors;
using testing::OpenWriterOrDie;
using testing::SyntheticStatsRecord;
using testing::TempDir;

StatsRow Row(std::uint64_t i) {
  StatsRow row{};
  row.global_step = static_cast<std::int64_t>(i / 1000);
  row.mode = static_cast<std::uint8_t>(1 + i % 4);
  row.mode_step = static_cast<std::int64_t>(i / 1000 + 7);
  row.tensor_id = static_cast<std::uint32_t>(i % 1000);
  row.has_stats = static_cast<std::uint8_t>(i % 2);
  row.s = ToStored(SyntheticStatsRecord(static_cast<std::int64_t>(i / 1000),
                                        static_cast<std::uint32_t>(i % 1000))
                       .stats);
  return row;
}

// The members, one by one (the struct has padding bytes).
void ExpectRowEqual(const StatsRow& got, const StatsRow& want, std::uint64_t i) {
  ASSERT_EQ(got.global_step, want.global_step) << "row " << i;
  ASSERT_EQ(got.mode, want.mode) << "row " << i;
  ASSERT_EQ(got.mode_step, want.mode_step) << "row " << i;
  ASSERT_EQ(got.tensor_id, want.tensor_id) << "row " << i;
  ASSERT_EQ(got.has_stats, want.has_stats) << "row " << i;
  ASSERT_EQ(std::memcmp(&got.s, &want.s, sizeof(StoredStats)), 0) << "row " << i;
}

struct Layout {
  H5D_layout_t layout = H5D_LAYOUT_ERROR;
  hsize_t chunk = 0;     // 0 unless chunked
  hsize_t max_rows = 0;  // H5S_UNLIMITED when extendible
  std::vector<H5Z_filter_t> filters;
};

Layout ReadLayout(hid_t file, const char* table = kStatsTable) {
  Layout out;
  H5DataSet ds(H5Dopen2(file, table, H5P_DEFAULT));
  EXPECT_TRUE(ds.valid());
  if (!ds.valid()) return out;
  H5Plist dcpl(H5Dget_create_plist(ds.get()));
  out.layout = H5Pget_layout(dcpl.get());
  if (out.layout == H5D_CHUNKED) H5Pget_chunk(dcpl.get(), 1, &out.chunk);
  for (int i = 0; i < H5Pget_nfilters(dcpl.get()); ++i) {
    unsigned flags = 0, values[4] = {0};
    std::size_t nvalues = 4;
    out.filters.push_back(H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues,
                                         values, 0, nullptr, nullptr));
  }
  H5Space space(H5Dget_space(ds.get()));
  hsize_t dims[1] = {0}, max_dims[1] = {0};
  H5Sget_simple_extent_dims(space.get(), dims, max_dims);
  out.max_rows = max_dims[0];
  return out;
}

TEST(StreamedTableTest, ReadsBackExactlyAtEveryRowCountAndLevel) {
  TempDir dir;
  StreamedTable probe(kStatsTable);
  {
    H5Lock lock;
    TSTAT_ASSERT_OK(probe.Reset(StatsRowType, 4));
  }
  const std::uint64_t C = probe.chunk_rows();
  // The packed row is 158 bytes: 6,636 rows per 1 MiB chunk.
  ASSERT_EQ(C, kChunkBytes / 158);
  const std::vector<std::uint64_t> counts = {1, 40, C - 1, C, C + 1, 2 * C, 3 * C + 5};
  ChunkDeflater deflater;
  for (int level : {0, 1, 4}) {  // 1: tstat's encoder, matching rows a step (1,000 rows) back
    for (std::uint64_t n : counts) {
      if (level == 0 && n != C + 1 && n != 40) continue;  // level 0 never streams
      SCOPED_TRACE(std::to_string(n) + " rows at level " + std::to_string(level));
      const std::string path = dir.Sub(std::to_string(n) + "_" + std::to_string(level) + ".h5");
      H5Lock lock;
      H5File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
      ASSERT_TRUE(file.valid());
      StreamedTable table(kStatsTable);
      TSTAT_ASSERT_OK(table.Reset(StatsRowType, level));
      table.set_step_rows(1000);  // Row(i): tensor i % 1000 of step i / 1000
      for (std::uint64_t i = 0; i < n; ++i) {
        const StatsRow row = Row(i);
        TSTAT_ASSERT_OK(table.Append(file.get(), &row, &deflater, path));
        ASSERT_EQ(table.rows(), i + 1);
      }
      // Every full chunk is in the file before Finish (level 1..9).
      const bool streamed = level > 0 && n >= C;
      EXPECT_EQ(H5Lexists(file.get(), kStatsTable, H5P_DEFAULT) > 0, streamed);
      TSTAT_ASSERT_OK(table.Finish(file.get(), &deflater, path));
      EXPECT_EQ(H5Fget_obj_count(file.get(), H5F_OBJ_DATASET), 0);

      auto type = StatsRowType();
      TSTAT_ASSERT_OK(type);
      std::vector<StatsRow> rows;
      TSTAT_ASSERT_OK(ReadTable(file.get(), kStatsTable, type->get(), &rows, path));
      ASSERT_EQ(rows.size(), n);
      for (std::uint64_t i = 0; i < n; ++i) ExpectRowEqual(rows[i], Row(i), i);

      const Layout layout = ReadLayout(file.get());
      if (n * 158 <= kCompactBytes) {
        EXPECT_EQ(layout.layout, H5D_COMPACT);
      } else if (level == 0) {
        EXPECT_EQ(layout.layout, H5D_CONTIGUOUS);
        EXPECT_TRUE(layout.filters.empty());
      } else {
        EXPECT_EQ(layout.layout, H5D_CHUNKED);
        EXPECT_EQ(layout.chunk, n > C ? C : n);  // a whole write of n <= C rows: one chunk
        EXPECT_EQ(layout.filters,
                  (std::vector<H5Z_filter_t>{H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}));
        EXPECT_EQ(layout.max_rows, streamed ? H5S_UNLIMITED : n);
      }
    }
  }
}

// The table is reused segment after segment: Close drops a half-written one
// (no dataset left open) and the next Reset starts from row 0.
TEST(StreamedTableTest, CloseDropsAndResetStartsAgain) {
  TempDir dir;
  ChunkDeflater deflater;
  StreamedTable table(kStatsTable);
  H5Lock lock;
  const std::string first = dir.Sub("first.h5");
  H5File a(H5Fcreate(first.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  TSTAT_ASSERT_OK(table.Reset(StatsRowType, 6));
  const std::uint64_t C = table.chunk_rows();
  for (std::uint64_t i = 0; i < C + 10; ++i) {
    const StatsRow row = Row(i);
    TSTAT_ASSERT_OK(table.Append(a.get(), &row, &deflater, first));
  }
  EXPECT_EQ(H5Fget_obj_count(a.get(), H5F_OBJ_DATASET), 1);
  table.Close();
  EXPECT_EQ(table.rows(), 0u);
  EXPECT_EQ(H5Fget_obj_count(a.get(), H5F_OBJ_DATASET), 0);

  const std::string second = dir.Sub("second.h5");
  H5File b(H5Fcreate(second.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  TSTAT_ASSERT_OK(table.Reset(StatsRowType, 6));
  for (std::uint64_t i = 0; i < 5; ++i) {
    const StatsRow row = Row(i + 100);
    TSTAT_ASSERT_OK(table.Append(b.get(), &row, &deflater, second));
  }
  TSTAT_ASSERT_OK(table.Finish(b.get(), &deflater, second));
  auto type = StatsRowType();
  TSTAT_ASSERT_OK(type);
  std::vector<StatsRow> rows;
  TSTAT_ASSERT_OK(ReadTable(b.get(), kStatsTable, type->get(), &rows, second));
  ASSERT_EQ(rows.size(), 5u);
  for (std::uint64_t i = 0; i < 5; ++i) ExpectRowEqual(rows[i], Row(i + 100), i);
}

// h5py (no tstat code) reads a streamed table of three chunks and a tail as
// the same rows, type and chunking as HDF5's own whole write of them.
TEST(StreamedTableTest, H5pyReadsAStreamedTableAsAWholeWrittenOne) {
  TempDir dir;
  const std::string path = dir.Sub("h5py.h5");
  {
    H5Lock lock;
    H5File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(file.valid());
    ChunkDeflater deflater;
    StreamedTable table(kStatsTable);
    TSTAT_ASSERT_OK(table.Reset(StatsRowType, 4));
    const std::uint64_t n = 3 * table.chunk_rows() + 5;
    std::vector<StatsRow> rows;
    for (std::uint64_t i = 0; i < n; ++i) {
      rows.push_back(Row(i));
      TSTAT_ASSERT_OK(table.Append(file.get(), &rows.back(), &deflater, path));
    }
    TSTAT_ASSERT_OK(table.Finish(file.get(), &deflater, path));
    H5DataSet ds(H5Dopen2(file.get(), kStatsTable, H5P_DEFAULT));
    TSTAT_ASSERT_OK(WriteInt64Attribute(ds.get(), "level", 4, path));
    auto type = StatsRowType();
    TSTAT_ASSERT_OK(type);
    // No deflater: HDF5's own type conversion and filter pipeline.
    TSTAT_ASSERT_OK(WriteTable(file.get(), "stats_ref", type->get(), rows, 4, path));
  }
  const std::string cmd =
      std::string("/usr/bin/python3 ") + TSTAT_H5PY_SELF_CHUNKS + " '" + path + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

using RecordFn = TensorStatsRecord (*)(std::int64_t step, std::uint32_t tensor_id);

// A writer of `tensors` tensors with one step flushed, then steps of
// make(step, t) for every tensor written under a 64 KiB file size limit until
// a Write fails (at most `max_steps` of them; with `then_flush`, a Flush after
// them when none did): the failure names the second segment, every record
// written since the flush is counted lost, and the writer goes on with step
// 100 in a new segment, whose trial is returned.
std::unique_ptr<Trial> FailAChunkWriteAndGoOn(const TempDir& dir, std::uint32_t tensors,
                                              RecordFn make, std::int64_t max_steps,
                                              bool then_flush, int level, const char* what) {
  auto writer = OpenWriterOrDie(dir.path(), 0, 1, "{}", level);
  EXPECT_TRUE(writer->RegisterTensors(NumberedTensors(tensors)).ok());
  StepBatch first = MakeBatch(0);
  first.stats.push_back(SyntheticStatsRecord(0, 0));
  EXPECT_TRUE(writer->Write(first).ok());
  EXPECT_TRUE(writer->Flush({}).ok());
  Status failure;
  std::uint64_t attempted = 0;  // records handed to the writer since the flush
  std::int64_t step = 1;
  {
    FileSizeLimit limit(64 * 1024);
    EXPECT_TRUE(limit.set());
    for (; step <= max_steps && failure.ok(); ++step) {
      StepBatch b = MakeBatch(step);
      for (std::uint32_t t = 0; t < tensors; ++t) b.stats.push_back(make(step, t));
      attempted += tensors;
      failure = writer->Write(b);
    }
    if (failure.ok() && then_flush) failure = writer->Flush({});
  }
  EXPECT_FALSE(failure.ok()) << what << ": nothing failed";
  std::cout << "file size limit, streamed " << what << " (step " << step - 1
            << "): " << failure.ToString() << "\n";
  EXPECT_NE(failure.message().find("seg-000000000001.h5.tmp"), std::string::npos)
      << failure.message();
  EXPECT_NE(failure.message().find(std::to_string(attempted) + " records lost"), std::string::npos)
      << failure.message();
  EXPECT_EQ(writer->records_lost(), attempted);
  StepBatch next = MakeBatch(100);
  for (std::uint32_t t = 0; t < tensors; ++t) next.stats.push_back(make(100, t));
  EXPECT_TRUE(writer->Write(next).ok());
  EXPECT_TRUE(writer->Close({}).ok());
  writer.reset();
  EXPECT_EQ(OpenH5ObjectCount(), 0);
  auto trial = Trial::Open(dir.path());
  EXPECT_TRUE(trial.ok()) << testing::StatusText(trial);
  if (!trial.ok()) return nullptr;
  EXPECT_EQ((*trial)->steps().size(), 2u);
  return std::move(*trial);
}

// Stats rows go to the file a chunk at a time while the segment is open
// (io/streamed_table.h): a chunk write that fails fails the segment, and the
// records lost are exactly those of the segment, the failing step's included,
// whether the failure comes at a Write or at the Flush. 1,000 tensors a step:
// three full chunks of 6,636 rows in 20 steps, well past 64 KiB deflated.
TEST(StreamedTableTest, WriterCountsEveryRecordLostToAFailingChunkWrite) {
  TempDir dir;
  auto trial = FailAChunkWriteAndGoOn(dir, 1000, SyntheticStatsRecord, 20, true, 4, "stats");
  ASSERT_NE(trial, nullptr);
  auto stats = trial->stats("w999", 100);
  TSTAT_ASSERT_OK(stats);
  ExpectStatsEqual(*stats, SyntheticStatsRecord(100, 999).stats, "w999 at step 100");
}

// A record of tensor `t` at `step` with kWideChannels distinct per-channel stats.
constexpr std::uint32_t kWideTensors = 2, kWideChannels = 1500;
TensorStatsRecord WideChannelRecord(std::int64_t step, std::uint32_t t) {
  TensorStatsRecord r = SyntheticStatsRecord(step, t);
  PerChannelStats& pc = r.per_channel.emplace();
  pc.axis = static_cast<int>(t);
  for (std::uint32_t c = 0; c < kWideChannels; ++c) {
    pc.channels.push_back(SyntheticStatsRecord(step, 1000 + c * kWideTensors + t).stats);
  }
  return r;
}

// Per-channel rows (thousands a step where layers are wide) go to the
// segment file a chunk at a time as well: a segment of three chunks and a
// tail reads back channel by channel at every step, streamed (chunked and
// extendible) at level 1 and written whole at the flush at level 0.
TEST(StreamedTableTest, WriterStreamsWideChannelTables) {
  constexpr std::int64_t kSteps = 8;
  const std::uint64_t rows = kWideTensors * kWideChannels * static_cast<std::uint64_t>(kSteps);
  StreamedTable probe(kChannelsTable);
  {
    H5Lock lock;
    TSTAT_ASSERT_OK(probe.Reset(ChannelRowType, 1));
  }
  ASSERT_GT(rows, 3 * probe.chunk_rows());
  ASSERT_NE(rows % probe.chunk_rows(), 0u);
  for (int level : {0, 1}) {
    SCOPED_TRACE("level " + std::to_string(level));
    TempDir dir;
    auto writer = OpenWriterOrDie(dir.path(), 0, 1, "{}", level);
    TSTAT_ASSERT_OK(writer->RegisterTensors(NumberedTensors(kWideTensors)));
    for (std::int64_t step = 0; step < kSteps; ++step) {
      StepBatch b = MakeBatch(step);
      for (std::uint32_t t = 0; t < kWideTensors; ++t)
        b.stats.push_back(WideChannelRecord(step, t));
      TSTAT_ASSERT_OK(writer->Write(b));
    }
    TSTAT_ASSERT_OK(writer->Close({}));
    writer.reset();
    {
      H5Lock lock;
      const std::string seg = dir.Sub("worker-00000/seg-000000000000.h5");
      H5File file(H5Fopen(seg.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
      ASSERT_TRUE(file.valid()) << seg;
      const Layout layout = ReadLayout(file.get(), kChannelsTable);
      EXPECT_EQ(layout.layout, level == 0 ? H5D_CONTIGUOUS : H5D_CHUNKED);
      EXPECT_EQ(layout.max_rows, level == 0 ? rows : H5S_UNLIMITED);
      if (level == 1) EXPECT_EQ(layout.chunk, probe.chunk_rows());
    }
    auto trial = Trial::Open(dir.path());
    TSTAT_ASSERT_OK(trial);
    for (std::int64_t step = 0; step < kSteps; ++step) {
      for (std::uint32_t t = 0; t < kWideTensors; ++t) {
        auto got = (*trial)->record("w" + std::to_string(t), step);
        TSTAT_ASSERT_OK(got);
        testing::ExpectRecordEqual(*got, WideChannelRecord(step, t),
                                   "w" + std::to_string(t) + " at step " + std::to_string(step));
      }
    }
  }
  EXPECT_EQ(OpenH5ObjectCount(), 0);
}

// A channels chunk that cannot be written fails the segment as a stats chunk
// does, at the Write that filled it (3,000 channel rows a step: a chunk
// fills within three steps, and no Flush follows).
TEST(StreamedTableTest, WriterCountsRecordsLostToAFailingChannelChunkWrite) {
  TempDir dir;
  auto trial =
      FailAChunkWriteAndGoOn(dir, kWideTensors, WideChannelRecord, 6, false, 1, "channels");
  ASSERT_NE(trial, nullptr);
  auto got = trial->record("w1", 100);
  TSTAT_ASSERT_OK(got);
  testing::ExpectRecordEqual(*got, WideChannelRecord(100, 1), "w1 at step 100");
}

// Destroyed with the exp_hist table open (past its first chunk): the segment
// is dropped as a crash would leave it, with no HDF5 object left open.
TEST(StreamedTableTest, WriterDestroyedWithATableOpenLeavesNothingOpen) {
  TempDir dir;
  {
    auto writer = OpenWriterOrDie(dir.path());
    constexpr std::uint32_t kRecords = 32000;  // exp_hist: one chunk of 31,775 rows written
    TSTAT_ASSERT_OK(writer->RegisterTensors(NumberedTensors(kRecords)));
    StepBatch b = MakeBatch(0);
    for (std::uint32_t t = 0; t < kRecords; ++t) {
      TensorStatsRecord r = SyntheticStatsRecord(0, t);
      ExponentBins& bins = r.exponent_histogram.emplace();
      bins.first_bin = 100;
      bins.counts = {1, 2};
      b.stats.push_back(std::move(r));
    }
    TSTAT_ASSERT_OK(writer->Write(b));
    EXPECT_GT(OpenH5ObjectCount(), 1);  // the file and exp_hist
  }
  EXPECT_EQ(OpenH5ObjectCount(), 0);
  auto left = ListDir(dir.Sub("worker-00000"));
  TSTAT_ASSERT_OK(left);
  EXPECT_TRUE(left->empty());
}

TEST(StreamedTableTest, AppendBeforeResetIsAnError) {
  StreamedTable table(kStatsTable);
  ChunkDeflater deflater;
  const StatsRow row = Row(0);
  const Status s = table.Append(-1, &row, &deflater, "nowhere.h5");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("'stats'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tstat::io
