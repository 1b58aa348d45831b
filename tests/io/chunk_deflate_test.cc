// Chunks that tstat shuffles and deflates itself (io/chunk_deflate.h,
// io/table_chunk_writer.h) must decode to the rows written: through HDF5's
// filter pipeline (ReadTable), through zlib + an independent unshuffle here,
// and through h5py (tests/io/h5py_reads_self_chunks.py). Each table is also
// written through HDF5's own pipeline as NAME_ref for comparison.
#include "io/codec/chunk_deflate.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "io/format/segment_schema.h"
#include "io/h5/h5_attribute.h"
#include "io/h5/h5_chunk_read.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_lock.h"
#include "io/h5/h5_type.h"
#include "io/h5/table_chunk_writer.h"
#include "tests/io/io_test_util.h"

namespace tstat::io {
namespace {

using testing::TempDir;

// Rows with every byte (padding included) set: zero, then distinct values;
// every 7th row carries a NaN and an infinity.
std::vector<StatsRow> MakeStatsRows(std::size_t n) {
  std::vector<StatsRow> rows(n);
  std::memset(static_cast<void*>(rows.data()), 0, n * sizeof(StatsRow));
  for (std::size_t i = 0; i < n; ++i) {
    StatsRow& r = rows[i];
    r.global_step = static_cast<std::int64_t>(i / 100);
    r.mode = static_cast<std::uint8_t>(1 + i % 4);
    r.mode_step = static_cast<std::int64_t>(i / 100) - 3;
    r.tensor_id = static_cast<std::uint32_t>(i % 100);
    r.has_stats = static_cast<std::uint8_t>(i % 5 != 0);
    r.s.count = 1000 + i;
    r.s.finite_count = 990 + i;
    r.s.nan_count = i % 3;
    r.s.zero_count = i * 7 % 11;
    r.s.small_count = i;
    r.s.min = -0.5 * static_cast<double>(i);
    r.s.max = std::sqrt(static_cast<double>(i) + 2.0);
    r.s.mean = i % 7 == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / (1.0 + i);
    r.s.m2 = i % 7 == 3 ? std::numeric_limits<double>::infinity() : 3.25 * i;
    r.s.l1 = 1e-300 * static_cast<double>(i);
    r.s.amax = static_cast<double>(i) * 1e10;
  }
  return rows;
}

std::vector<std::uint64_t> MakeCounts(std::size_t n) {
  std::vector<std::uint64_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = (i * 2654435761u) % 1000 + (i % 97 == 0 ? 1ull << 60 : 0);
  return v;
}

// HDF5's shuffle, spelled out: byte j of element i goes to j * n + i.
std::vector<std::uint8_t> ReferenceShuffle(const std::vector<std::uint8_t>& in, std::size_t size) {
  std::vector<std::uint8_t> out = in;
  const std::size_t n = in.size() / size;
  if (size <= 1 || n <= 1) return out;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < size; ++j) out[j * n + i] = in[i * size + j];
  return out;
}

TEST(ChunkDeflateTest, ShuffleMatchesHdf5Definition) {
  for (std::size_t size : {1u, 2u, 7u, 8u, 13u, 16u, 33u, 158u}) {
    for (std::size_t bytes : {std::size_t{0}, size, 7 * size, 16 * size, 17 * size + 1,
                              64 * size + 3, 1000 * size + 5}) {
      std::vector<std::uint8_t> in(bytes);
      for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<std::uint8_t>(i * 31 + i / 7);
      std::vector<std::uint8_t> got(bytes);
      ShuffleBytes(in.data(), bytes, size, got.data());
      EXPECT_EQ(got, ReferenceShuffle(in, size)) << "element " << size << ", bytes " << bytes;
    }
  }
}

TEST(ChunkDeflateTest, UnshuffleInvertsTheShuffle) {
  for (std::size_t size : {1u, 2u, 7u, 8u, 158u}) {
    for (std::size_t bytes : {std::size_t{0}, size, 17 * size + 1, 1000 * size + 5}) {
      std::vector<std::uint8_t> in(bytes);
      for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<std::uint8_t>(i * 131 + i / 5);
      std::vector<std::uint8_t> back(bytes);
      UnshuffleBytes(ReferenceShuffle(in, size).data(), bytes, size, back.data());
      EXPECT_EQ(back, in) << "element " << size << ", bytes " << bytes;
    }
  }
}

// UnshuffleRuns puts byte src + k of each element at dst + k of its row,
// for runs of every length around the eight-plane groups, element counts
// around the sixteen-element groups, and leaves every other byte alone.
TEST(ChunkDeflateTest, UnshuffleRunsPlacesEachRunAndNothingElse) {
  constexpr std::size_t kSize = 37, kStride = 56;
  const std::vector<ByteRun> runs = {{0, 0, 8}, {8, 9, 1}, {9, 16, 9}, {18, 27, 3}, {21, 31, 16}};
  for (std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                        std::size_t{47}, std::size_t{414}}) {
    std::vector<std::uint8_t> rows(n * kSize);
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::uint8_t>(i * 7 + 3);
    const std::vector<std::uint8_t> planes = ReferenceShuffle(rows, kSize);
    std::vector<std::uint8_t> got(n * kStride, 0xEE), want(n * kStride, 0xEE);
    for (std::size_t i = 0; i < n; ++i) {
      for (const ByteRun& r : runs) {
        for (std::size_t k = 0; k < r.bytes; ++k) {
          want[i * kStride + r.dst + k] = rows[i * kSize + r.src + k];
        }
      }
    }
    UnshuffleRuns(n == 1 ? rows.data() : planes.data(), n, runs.data(), runs.size(), kStride,
                  got.data());
    EXPECT_EQ(got, want) << n << " elements";
  }
}

TEST(ChunkDeflateTest, OutputIsAZlibStreamOfTheShuffledBytes) {
  ChunkDeflater deflater;
  std::vector<std::uint8_t> in(100000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>((i * i) >> 3);
  for (int level : {1, 4, 9}) {
    auto z = deflater.ShuffleDeflate(in.data(), in.size(), 8, level);
    ASSERT_TRUE(z.ok()) << z.status().ToString();
    std::vector<std::uint8_t> back(in.size());
    uLongf back_size = back.size();
    ASSERT_EQ(uncompress(back.data(), &back_size, z->data, z->size), Z_OK) << "level " << level;
    ASSERT_EQ(back_size, in.size());
    EXPECT_EQ(back, ReferenceShuffle(in, 8)) << "level " << level;
  }
  EXPECT_FALSE(deflater.ShuffleDeflate(in.data(), in.size(), 8, 0).ok());
  EXPECT_FALSE(deflater.ShuffleDeflate(in.data(), in.size(), 8, 10).ok());
}

// The packer turns a padded row into exactly HDF5's packed file row.
TEST(ChunkDeflateTest, RowPackerMatchesHdf5Conversion) {
  H5Lock lock;
  auto mem = StatsRowType();
  ASSERT_TRUE(mem.ok());
  auto file = PackedCopy(mem->get());
  ASSERT_TRUE(file.ok());
  auto packer = RowPacker::Make(mem->get(), file->get());
  ASSERT_TRUE(packer.has_value());
  ASSERT_EQ(packer->file_size(), H5Tget_size(file->get()));
  ASSERT_LT(packer->file_size(), sizeof(StatsRow));  // padding exists and is removed
  std::vector<StatsRow> rows = MakeStatsRows(50);
  std::vector<std::uint8_t> ours(50 * packer->file_size());
  packer->Pack(reinterpret_cast<const std::uint8_t*>(rows.data()), rows.size(), ours.data());
  std::vector<StatsRow> converted = rows;  // H5Tconvert works in place
  std::vector<StatsRow> background(rows.size());
  ASSERT_GE(H5Tconvert(mem->get(), file->get(), converted.size(), converted.data(),
                       background.data(), H5P_DEFAULT),
            0);
  EXPECT_EQ(0, std::memcmp(ours.data(), converted.data(), ours.size()));
  // String members stored narrower than in memory need HDF5's conversion.
  auto tensors = TensorRowType();
  ASSERT_TRUE(tensors.ok());
  auto tensors_file = PackedCopy(tensors->get());
  ASSERT_TRUE(tensors_file.ok());
  EXPECT_TRUE(RowPacker::Make(tensors->get(), tensors_file->get()).has_value());
  auto narrow_file = PackedCopyWithStringWidths(tensors->get(), {{"name", 12}});
  ASSERT_TRUE(narrow_file.ok());
  EXPECT_FALSE(RowPacker::Make(tensors->get(), narrow_file->get()).has_value());
  // So do variable-length ones.
  auto vlen = VlenStringType();
  ASSERT_TRUE(vlen.ok());
  struct VlenRow {
    const char* name;
  };
  auto vlen_row = CompoundBuilder(sizeof(VlenRow)).Add("name", 0, vlen->get()).Build();
  ASSERT_TRUE(vlen_row.ok());
  auto vlen_file = PackedCopy(vlen_row->get());
  ASSERT_TRUE(vlen_file.ok());
  EXPECT_FALSE(RowPacker::Make(vlen_row->get(), vlen_file->get()).has_value());
}

class SelfChunksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Sub("tables.h5");
    H5Lock lock;
    file_ = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(file_, 0);
  }
  void TearDown() override {
    H5Lock lock;
    if (file_ >= 0) H5Fclose(file_);
  }
  void CloseFile() {
    H5Lock lock;
    ASSERT_GE(H5Fclose(file_), 0);
    file_ = -1;
  }

  // Writes `rows` as `name` (our chunks) and `name`_ref (HDF5's filters),
  // reads both back through HDF5 and compares them with `rows`.
  template <class Row>
  void WriteAndCheck(const std::string& name, hid_t mem_type, const std::vector<Row>& rows,
                     int level) {
    H5Lock lock;
    const std::string ref = name + "_ref";
    // As segment_file_writer.cc does: tables are stored as the packed copy
    // of their row type, flat arrays as their own type.
    const bool table = H5Tget_class(mem_type) == H5T_COMPOUND;
    auto packed = table ? PackedCopy(mem_type) : Result<H5Type>(H5Type(H5Tcopy(mem_type)));
    TSTAT_ASSERT_OK(packed);
    const hid_t file_type = packed->get();
    TSTAT_ASSERT_OK(WriteNewDataset(file_, name.c_str(), file_type, mem_type, {rows.size()},
                                    rows.data(), level, path_, &deflater_));
    TSTAT_ASSERT_OK(WriteNewDataset(file_, ref.c_str(), file_type, mem_type, {rows.size()},
                                    rows.data(), level, path_));
    {
      H5DataSet d(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
      ASSERT_TRUE(WriteInt64Attribute(d.get(), "level", level, path_).ok());
    }
    for (const std::string& n : {name, ref}) {
      std::vector<Row> back;
      ASSERT_TRUE(ReadTable(file_, n.c_str(), mem_type, &back, path_).ok()) << n;
      ASSERT_EQ(back.size(), rows.size()) << n;
      EXPECT_EQ(0, std::memcmp(back.data(), rows.data(), rows.size() * sizeof(Row))) << n;
    }
  }

  // The stored chunk at `offset` of `name` is our deflater's output for the
  // packed rows there (so the self-compressed path was taken), and zlib plus
  // an unshuffle decode it to those rows.
  template <class Row>
  void CheckStoredChunk(const std::string& name, hid_t mem_type, const std::vector<Row>& rows,
                        hsize_t offset, int level) {
    H5Lock lock;
    H5DataSet d(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
    H5Plist dcpl(H5Dget_create_plist(d.get()));
    hsize_t chunk_rows = 0;
    ASSERT_EQ(H5Pget_chunk(dcpl.get(), 1, &chunk_rows), 1);
    H5Type file_type(H5Dget_type(d.get()));
    auto packer = RowPacker::Make(mem_type, file_type.get());
    ASSERT_TRUE(packer.has_value());
    const std::size_t row = packer->file_size();
    std::vector<std::uint8_t> packed(chunk_rows * row, 0);
    const std::size_t n = std::min<std::size_t>(chunk_rows, rows.size() - offset);
    packer->Pack(reinterpret_cast<const std::uint8_t*>(rows.data() + offset), n, packed.data());

    hsize_t stored = 0;
    const hsize_t at[1] = {offset};
    ASSERT_GE(H5Dget_chunk_storage_size(d.get(), at, &stored), 0);
    std::vector<std::uint8_t> raw(stored);
    std::uint32_t filters = 99;
    ASSERT_GE(H5Dread_chunk(d.get(), H5P_DEFAULT, at, &filters, raw.data()), 0);
    EXPECT_EQ(filters, 0u);  // both filters applied

    ChunkDeflater fresh;
    auto z = fresh.ShuffleDeflate(packed.data(), packed.size(), row, level);
    ASSERT_TRUE(z.ok());
    EXPECT_EQ(std::vector<std::uint8_t>(z->data, z->data + z->size), raw) << name << " @" << offset;

    std::vector<std::uint8_t> inflated(packed.size());
    uLongf size = inflated.size();
    ASSERT_EQ(uncompress(inflated.data(), &size, raw.data(), raw.size()), Z_OK);
    ASSERT_EQ(size, packed.size());
    std::vector<std::uint8_t> unshuffled(packed.size());
    const std::size_t elements = packed.size() / row;
    for (std::size_t i = 0; i < elements; ++i)
      for (std::size_t j = 0; j < row; ++j) unshuffled[i * row + j] = inflated[j * elements + i];
    EXPECT_EQ(0, std::memcmp(unshuffled.data(), packed.data(), n * row)) << name;
  }

  TempDir dir_;
  std::string path_;
  hid_t file_ = -1;
  ChunkDeflater deflater_;
};

TEST_F(SelfChunksTest, TablesDecodeThroughHdf5ZlibAndH5py) {
  auto stats = StatsRowType();
  ASSERT_TRUE(stats.ok());
  const hid_t u64 = H5T_NATIVE_UINT64;
  // Larger than one chunk (1 MiB / 158 bytes = 6636 rows): 4 chunks, the
  // last one partial.
  const std::vector<StatsRow> big = MakeStatsRows(20000);
  WriteAndCheck("stats_big", stats->get(), big, 4);
  CheckStoredChunk("stats_big", stats->get(), big, 0, 4);
  CheckStoredChunk("stats_big", stats->get(), big, 3 * 6636, 4);
  WriteAndCheck("stats_big_l9", stats->get(), big, 9);
  CheckStoredChunk("stats_big_l9", stats->get(), big, 6636, 9);
  WriteAndCheck("stats_big_l1", stats->get(), big, 1);  // the run-length encoder
  CheckStoredChunk("stats_big_l1", stats->get(), big, 2 * 6636, 1);
  // One chunk holding the whole table (> 8 KiB, < 1 MiB).
  const std::vector<StatsRow> one = MakeStatsRows(500);
  WriteAndCheck("stats_one_chunk", stats->get(), one, 4);
  CheckStoredChunk("stats_one_chunk", stats->get(), one, 0, 4);
  // Below the compact threshold, and level 0 (contiguous): HDF5 writes these.
  WriteAndCheck("stats_small", stats->get(), MakeStatsRows(30), 4);
  WriteAndCheck("stats_level0", stats->get(), big, 0);
  // A flat uint64 array (the packer is a plain copy) of 3 chunks + an edge.
  const std::vector<std::uint64_t> counts = MakeCounts(3 * 131072 + 17);
  WriteAndCheck("counts", u64, counts, 4);
  CheckStoredChunk("counts", u64, counts, 3 * 131072, 4);
  WriteAndCheck("counts_l1", u64, counts, 1);
  CheckStoredChunk("counts_l1", u64, counts, 131072, 1);
  CloseFile();
  const std::string cmd =
      std::string("/usr/bin/python3 ") + TSTAT_H5PY_SELF_CHUNKS + " '" + path_ + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// tstat decodes 1-D chunked tables itself (h5_chunk_read.h): what it reads
// must be what HDF5's own pipeline reads (H5Dread), for chunks HDF5 wrote,
// stored types narrower than the memory type, and a memory type with a
// member the file lacks (zero).
TEST_F(SelfChunksTest, TablesDecodedByTstatEqualHdf5sOwnRead) {
  // Counts stored as uint16 (the writer narrows count arrays), read as
  // uint64, over 3 chunks and an edge.
  std::vector<std::uint64_t> counts(3 * 524288 + 11);
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = (i * 40503u) & 0xFFFF;
  TSTAT_ASSERT_OK(WriteNewDataset(file_, "narrow", H5T_STD_U16LE, H5T_NATIVE_UINT64,
                                  {counts.size()}, counts.data(), 4, path_));
  // A compound stored as {a int32}, read as {a int64, b double}.
  struct Wide {
    std::int64_t a;
    double b;
  };
  H5Type stored(H5Tcreate(H5T_COMPOUND, 4));
  H5Tinsert(stored.get(), "a", 0, H5T_STD_I32LE);
  H5Type wide(H5Tcreate(H5T_COMPOUND, sizeof(Wide)));
  H5Tinsert(wide.get(), "a", offsetof(Wide, a), H5T_NATIVE_INT64);
  H5Tinsert(wide.get(), "b", offsetof(Wide, b), H5T_NATIVE_DOUBLE);
  H5Type narrow_mem(H5Tcreate(H5T_COMPOUND, sizeof(std::int32_t)));
  H5Tinsert(narrow_mem.get(), "a", 0, H5T_NATIVE_INT32);
  std::vector<std::int32_t> as(300000);
  for (std::size_t i = 0; i < as.size(); ++i) as[i] = static_cast<std::int32_t>(i * 7) - 1000000;
  TSTAT_ASSERT_OK(WriteNewDataset(file_, "compound", stored.get(), narrow_mem.get(), {as.size()},
                                  as.data(), 1, path_, &deflater_));

  std::vector<std::uint64_t> ours;
  TSTAT_ASSERT_OK(ReadTable(file_, "narrow", H5T_NATIVE_UINT64, &ours, path_));
  EXPECT_EQ(ours, counts);
  std::vector<std::uint64_t> theirs(counts.size());
  {
    H5Lock lock;
    H5DataSet d(H5Dopen2(file_, "narrow", H5P_DEFAULT));
    ASSERT_TRUE(IsChunked1D(d.get()));
    ASSERT_GE(H5Dread(d.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, theirs.data()), 0);
  }
  EXPECT_EQ(ours, theirs);

  std::vector<Wide> rows;
  TSTAT_ASSERT_OK(ReadTable(file_, "compound", wide.get(), &rows, path_));
  ASSERT_EQ(rows.size(), as.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].a, as[i]) << i;
    ASSERT_EQ(rows[i].b, 0.0) << i;
  }
}

}  // namespace
}  // namespace tstat::io
