// Crafted segments behind valid seals (what the seal cannot catch): datatypes
// and storage that do not match the format, a packed raw snapshot's byte
// range outside its dataset, raw shapes whose element count wraps around
// 2^64 or lies outside raw_shapes. Each is kCorruption naming the file and
// the cause, before any read past what is stored; the rest of the run reads.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "io/format/segment_schema.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_lock.h"
#include "io/h5/posix_file.h"
#include "io/read/segment_reader.h"
#include "tests/io/corruption_fixture.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

void RewriteRawIndex(const std::string& path,
                     const std::function<void(hid_t file, std::vector<RawIndexRow>* rows,
                                              std::vector<std::int64_t>* shapes)>& edit) {
  {
    H5Lock lock;
    H5File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(file.valid()) << path;
    auto type = RawIndexRowType();
    TSTAT_ASSERT_OK(type);
    std::vector<RawIndexRow> rows;
    std::vector<std::int64_t> shapes;
    TSTAT_ASSERT_OK(ReadTable(file.get(), kRawIndexTable, type->get(), &rows, path));
    TSTAT_ASSERT_OK(ReadTable(file.get(), kRawShapes, H5T_NATIVE_INT64, &shapes, path));
    ASSERT_FALSE(rows.empty()) << path;
    edit(file.get(), &rows, &shapes);
    for (const char* name : {kRawIndexTable, kRawShapes}) {
      ASSERT_GE(H5Ldelete(file.get(), name, H5P_DEFAULT), 0) << name;
    }
    TSTAT_ASSERT_OK(WriteTable(file.get(), kRawIndexTable, type->get(), rows, 0, path));
    if (!shapes.empty()) {
      TSTAT_ASSERT_OK(WriteNewDataset(file.get(), kRawShapes, H5T_NATIVE_INT64, H5T_NATIVE_INT64,
                                      {shapes.size()}, shapes.data(), 0, path));
    }
    TSTAT_ASSERT_OK(CloseH5File(&file, path));
  }
  TSTAT_ASSERT_OK(ResealSegmentFile(path));
}

// Replaces dataset (or root attribute, with `attribute`) `name` of the sealed
// segment `path` by one of type `type` holding `data` (`count` elements,
// 0: scalar) and reseals the file: a crafted segment with a valid seal.
void ReplaceWithType(const std::string& path, const char* name, bool attribute, hid_t type,
                     const void* data, hsize_t count) {
  {
    H5Lock lock;
    H5File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(file.valid()) << path;
    const hsize_t dims[1] = {count};
    H5Space space(count == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, nullptr));
    ASSERT_TRUE(space.valid());
    if (attribute) {
      ASSERT_GE(H5Adelete(file.get(), name), 0) << name;
      H5Attr attr(H5Acreate2(file.get(), name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
      ASSERT_TRUE(attr.valid()) << name;
      ASSERT_GE(H5Awrite(attr.get(), type, data), 0) << name;
    } else {
      if (H5Lexists(file.get(), name, H5P_DEFAULT) > 0) {
        ASSERT_GE(H5Ldelete(file.get(), name, H5P_DEFAULT), 0) << name;
      }
      H5DataSet set(
          H5Dcreate2(file.get(), name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      ASSERT_TRUE(set.valid()) << name;
      ASSERT_GE(H5Dwrite(set.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0) << name;
    }
    TSTAT_ASSERT_OK(CloseH5File(&file, path));
  }
  TSTAT_ASSERT_OK(ResealSegmentFile(path));
}

// Sealed segments whose datasets and attributes have other types than the
// format's (a string where a number or a table belongs, a number where a
// string belongs, a variable-length string where format_version 3 stores a
// fixed-length one, a table whose member changed class, a table with an extra
// variable-length member) are refused before HDF5 converts anything:
// kCorruption naming the file and the place, no crash, and the rest of the
// run reads (a damaged record table is reported by the query that reads it).
TEST_F(CorruptionTest, CraftedTypesAreRefusedBeforeReading) {
  const std::int64_t number = 7;
  const char* text = "crafted";
  H5Type vlen_str(H5Tcopy(H5T_C_S1));
  ASSERT_GE(H5Tset_size(vlen_str.get(), H5T_VARIABLE), 0);
  // A stats-like table whose tensor_id member is a string.
  struct BadRow {
    const char* tensor_id;
  };
  H5Type bad_row(H5Tcreate(H5T_COMPOUND, sizeof(BadRow)));
  ASSERT_GE(H5Tinsert(bad_row.get(), "tensor_id", 0, vlen_str.get()), 0);
  const BadRow rows[2] = {{"x"}, {"y"}};
  const char* strings[3] = {"a", "b", "c"};
  // A stats-like table with a variable-length member the reader never asks
  // for: HDF5's conversion would still walk it.
  struct ExtraRow {
    std::uint32_t tensor_id;
    const char* note;
  };
  H5Type extra_row(H5Tcreate(H5T_COMPOUND, sizeof(ExtraRow)));
  ASSERT_GE(
      H5Tinsert(extra_row.get(), "tensor_id", offsetof(ExtraRow, tensor_id), H5T_NATIVE_UINT32), 0);
  ASSERT_GE(H5Tinsert(extra_row.get(), "note", offsetof(ExtraRow, note), vlen_str.get()), 0);
  const ExtraRow extra_rows[2] = {{0, "x"}, {0, "y"}};
  // A header table of two rows.
  H5Type version_row(H5Tcreate(H5T_COMPOUND, sizeof(std::int64_t)));
  ASSERT_GE(H5Tinsert(version_row.get(), "format_version", 0, H5T_NATIVE_INT64), 0);
  const std::int64_t versions[2] = {3, 3};

  struct Case {
    const char* name;
    bool attribute;
    hid_t type;
    const void* data;
    hsize_t count;
    const char* needle;
  };
  const Case cases[] = {
      {kHeaderTable, false, vlen_str.get(), strings, 3,
       "stored as a string, not readable as a compound"},
      {kHeaderTable, false, version_row.get(), versions, 2, "header table of 2 rows"},
      {kConfigDataset, false, vlen_str.get(), &text, 0,
       "dataset 'config' holds variable-length strings"},
      {kConfigDataset, false, H5T_NATIVE_INT64, &number, 0,
       "dataset 'config' does not hold strings"},
      {kCollections, false, vlen_str.get(), strings, 3,
       "dataset 'collections' holds variable-length strings"},
      {kTensorsTable, false, vlen_str.get(), strings, 3,
       "stored as a string, not readable as a compound"},
      {kStatsTable, false, bad_row.get(), rows, 2, "member 'tensor_id': stored as a string"},
      {kStatsTable, false, extra_row.get(), extra_rows, 2,
       "holds variable-length data the reader does not read"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WriteFile(bad_path_, original_);
    ReplaceWithType(bad_path_, c.name, c.attribute, c.type, c.data, c.count);
    const Status read = ReadSegment(bad_path_).status();
    EXPECT_EQ(read.code(), StatusCode::kCorruption) << read.ToString();
    EXPECT_NE(read.message().find(kBadSegment), std::string::npos) << read.message();
    EXPECT_NE(read.message().find(c.needle), std::string::npos) << read.message();
    if (std::string(c.name) == kStatsTable) {
      ExpectRecordsRefused(c.name, c.needle, Stats::kDamaged);
    } else {
      ExpectRestReadable(c.name);
    }
  }
  // The root attributes repeat the header for h5py and h5dump users; the
  // reader never opens them (libhdf5 decodes attribute messages unchecked).
  for (const char* attribute : {"host", "world_size", "format_version"}) {
    SCOPED_TRACE(attribute);
    WriteFile(bad_path_, original_);
    ReplaceWithType(bad_path_, attribute, true, vlen_str.get(), &text, 0);
    TSTAT_EXPECT_OK(ReadSegment(bad_path_).status());
  }
  (void)number;
}

// Tables whose storage holds less than their rows: a compact dataset whose
// layout declares fewer bytes, and a deflated chunk that inflates to less
// than a chunk, or a chunk stored unfiltered and short. libhdf5 1.10.8 would
// copy past the end of its buffer; the reader refuses them first, naming
// the table (when a query reads it), and the rest of the run reads.
TEST_F(CorruptionTest, StorageShorterThanTheRowsIsRefused) {
  struct Case {
    const char* name;
    bool deflate;          // the chunk's filter
    std::size_t bytes_of;  // stored (or inflating to) this many of the chunk's bytes
    const char* needle;
  };
  const hsize_t rows = 64;
  const std::size_t row_bytes = sizeof(std::uint64_t);
  const Case cases[] = {
      {"short deflated chunk", true, rows * row_bytes / 2, "inflates to 256 bytes, not 512"},
      {"not deflate at all", true, 0, "is not a valid deflate stream"},
      {"short unfiltered chunk", false, rows * row_bytes / 2, "stores 256 bytes, not 512"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WriteFile(bad_path_, original_);
    {
      H5Lock lock;
      H5File file(H5Fopen(bad_path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      ASSERT_TRUE(file.valid());
      ASSERT_GE(H5Ldelete(file.get(), kExpHistCounts, H5P_DEFAULT), 0);
      H5Space space(H5Screate_simple(1, &rows, nullptr));
      H5Plist dcpl(H5Pcreate(H5P_DATASET_CREATE));
      ASSERT_GE(H5Pset_chunk(dcpl.get(), 1, &rows), 0);
      if (c.deflate) {
        ASSERT_GE(H5Pset_deflate(dcpl.get(), 6), 0);
      }
      H5DataSet set(H5Dcreate2(file.get(), kExpHistCounts, H5T_NATIVE_UINT64, space.get(),
                               H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
      ASSERT_TRUE(set.valid());
      std::vector<unsigned char> plain(c.bytes_of, 1), chunk;
      if (c.deflate && c.bytes_of > 0) {
        uLongf size = compressBound(plain.size());
        chunk.resize(size);
        ASSERT_EQ(compress2(chunk.data(), &size, plain.data(), plain.size(), 6), Z_OK);
        chunk.resize(size);
      } else if (c.deflate) {
        chunk.assign(40, 0x5A);  // not a zlib stream
      } else {
        chunk = plain;
      }
      const hsize_t at = 0;
      ASSERT_GE(H5Dwrite_chunk(set.get(), H5P_DEFAULT, 0, &at, chunk.size(), chunk.data()), 0);
      TSTAT_ASSERT_OK(CloseH5File(&file, bad_path_));
    }
    TSTAT_ASSERT_OK(ResealSegmentFile(bad_path_));
    const Status read = ReadSegment(bad_path_).status();
    EXPECT_EQ(read.code(), StatusCode::kCorruption) << read.ToString();
    EXPECT_NE(read.message().find(kExpHistCounts), std::string::npos) << read.message();
    EXPECT_NE(read.message().find(c.needle), std::string::npos) << read.message();
    ExpectRecordsRefused(c.name, c.needle, Stats::kIntact);
  }
}

// Points row `row` at a new shape appended to `shapes`.
void SetRawShape(RawIndexRow* row, std::vector<std::int64_t>* shapes,
                 const std::vector<std::int64_t>& shape) {
  row->shape_offset = shapes->size();
  row->rank = static_cast<std::uint32_t>(shape.size());
  shapes->insert(shapes->end(), shape.begin(), shape.end());
}

// A sealed segment whose raw_index sends the first (packed) snapshot's byte
// range past the end of raw/packed: the segment still loads, and reading that
// snapshot is kCorruption naming the file (never a read outside the dataset).
TEST_F(CorruptionTest, PackedRawRangeOutsideItsDatasetIsCorruption) {
  // raw/packed holds 4 snapshots of 256 bytes: far past its end, and across it.
  for (const std::uint64_t offset : {std::uint64_t{1} << 40, std::uint64_t{1024 - 100}}) {
    WriteFile(bad_path_, original_);
    RewriteRawIndex(bad_path_,
                    [&](hid_t, std::vector<RawIndexRow>* rows, std::vector<std::int64_t>*) {
                      ASSERT_EQ(rows->size(), 4u);  // steps 4..7
                      ASSERT_STREQ((*rows)[0].dataset, kRawPackedDataset);
                      (*rows)[0].byte_offset = offset;
                    });

    auto trial = Trial::Open(dir_.path());
    TSTAT_ASSERT_OK(trial);
    TSTAT_ASSERT_OK((*trial)->Refresh());
    const Status read = (*trial)->raw("a", 4).status();
    EXPECT_EQ(read.code(), StatusCode::kCorruption) << read.ToString();
    EXPECT_NE(read.message().find(kBadSegment), std::string::npos) << read.message();
    EXPECT_NE(read.message().find("raw/packed"), std::string::npos) << read.message();
    auto intact = (*trial)->raw("a", 5);  // the next snapshot in the same dataset
    TSTAT_ASSERT_OK(intact);
    EXPECT_EQ(intact->bytes, StepRaw(5).bytes.ToVector());
  }
}

// A run of one 512 x 512 f32 snapshot (1 MiB: a dataset of its own, raw/000000)
// at step 0; returns its segment's path.
std::string WriteOneBigSnapshot(const TempDir& dir, const std::vector<std::uint8_t>& bytes) {
  auto writer = OpenWriterOrDie(dir.path());
  EXPECT_NE(writer, nullptr);
  if (writer == nullptr) return "";
  EXPECT_TRUE(
      writer->RegisterTensors({MakeTensorInfo(0, "big", {}, DType::kFloat32, {512, 512})}).ok());
  StepBatch batch = MakeBatch(0);
  batch.raws = {MakeRawSnapshot(0, DType::kFloat32, {512, 512}, bytes)};
  EXPECT_TRUE(writer->Write(batch).ok());
  EXPECT_TRUE(writer->Close({}).ok());
  return dir.Sub("worker-00000/seg-000000000000.h5");
}

// The 1 MiB snapshot's raw_index shape rewritten to 5 x 3,689,348,814,741,962,752:
// its element count, 2^64 + 2^18, wraps around 2^64 to the dataset's 262,144,
// so only a checked count tells them apart. Reading it is kCorruption naming
// the file, never bytes handed out under an absurd shape.
TEST(RawShapeCorruptionTest, ShapeThatWrapsToTheDatasetSizeIsCorruption) {
  TempDir dir;
  std::vector<std::uint8_t> bytes(std::size_t{1} << 20);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 13);
  const std::string path = WriteOneBigSnapshot(dir, bytes);
  RewriteRawIndex(
      path, [&](hid_t, std::vector<RawIndexRow>* rows, std::vector<std::int64_t>* shapes) {
        ASSERT_EQ(rows->size(), 1u);
        ASSERT_STRNE((*rows)[0].dataset, kRawPackedDataset);
        SetRawShape(&(*rows)[0], shapes, {5, 3689348814741962752});  // (2^64 + 2^18) / 5
      });
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  auto raw = (*trial)->raw("big", 0);
  ASSERT_FALSE(raw.ok()) << "read under shape [" << raw->shape[0] << ", " << raw->shape[1] << "]";
  EXPECT_EQ(raw.status().code(), StatusCode::kCorruption) << raw.status().ToString();
  EXPECT_NE(raw.status().message().find("seg-000000000000.h5"), std::string::npos)
      << raw.status().message();
}

// raw/000000 replaced by a chunked dataset of 512 x 2^31 f32 (4 TiB) with no
// chunk written, raw_index agreeing: the reader must not try to allocate
// 4 TiB (std::bad_alloc through Trial) but report what the file stores.
TEST(RawShapeCorruptionTest, DimensionsFarBeyondTheStoredBytesAreCorruption) {
  TempDir dir;
  const std::string path =
      WriteOneBigSnapshot(dir, std::vector<std::uint8_t>(std::size_t{1} << 20, 7));
  RewriteRawIndex(
      path, [&](hid_t file, std::vector<RawIndexRow>* rows, std::vector<std::int64_t>* shapes) {
        ASSERT_GE(H5Ldelete(file, "raw/000000", H5P_DEFAULT), 0);
        const hsize_t dims[2] = {512, hsize_t{1} << 31}, chunk[2] = {1, 1 << 18};
        H5Space space(H5Screate_simple(2, dims, nullptr));
        H5Plist dcpl(H5Pcreate(H5P_DATASET_CREATE));
        ASSERT_GE(H5Pset_chunk(dcpl.get(), 2, chunk), 0);
        H5DataSet empty(H5Dcreate2(file, "raw/000000", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                   dcpl.get(), H5P_DEFAULT));
        ASSERT_TRUE(empty.valid());
        SetRawShape(&(*rows)[0], shapes, {512, std::int64_t{1} << 31});
      });
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  auto raw = (*trial)->raw("big", 0);
  ASSERT_FALSE(raw.ok());
  EXPECT_EQ(raw.status().code(), StatusCode::kCorruption) << raw.status().ToString();
  EXPECT_NE(raw.status().message().find("claims 4398046511104 bytes"), std::string::npos)
      << raw.status().message();
}

// raw_index rows whose (shape_offset, rank) leave raw_shapes, or whose
// dataset name fills all 24 characters with no terminator: the segment is
// kCorruption naming the file and the cause, never a read past raw_shapes.
TEST(RawShapeCorruptionTest, ShapeOutsideRawShapesIsCorruption) {
  TempDir dir;
  const std::string path =
      WriteOneBigSnapshot(dir, std::vector<std::uint8_t>(std::size_t{1} << 20, 7));
  for (const std::uint64_t offset : {std::uint64_t{1}, std::uint64_t{1} << 62}) {
    RewriteRawIndex(path,
                    [&](hid_t, std::vector<RawIndexRow>* rows, std::vector<std::int64_t>* shapes) {
                      ASSERT_EQ(shapes->size(), 2u);     // 512 x 512
                      (*rows)[0].shape_offset = offset;  // rank 2 from 1 or far past the end
                    });
    auto trial = Trial::Open(dir.path());
    TSTAT_ASSERT_OK(trial);
    const Status refreshed = (*trial)->Refresh();
    const Status read = refreshed.ok() ? (*trial)->raw("big", 0).status() : refreshed;
    ASSERT_FALSE(read.ok()) << "offset " << offset;
    EXPECT_EQ(read.code(), StatusCode::kCorruption) << read.ToString();
    EXPECT_NE(read.message().find("shape outside raw_shapes"), std::string::npos) << read.message();
    EXPECT_NE(read.message().find("seg-000000000000.h5"), std::string::npos) << read.message();
    RewriteRawIndex(path, [&](hid_t, std::vector<RawIndexRow>* rows, std::vector<std::int64_t>*) {
      (*rows)[0].shape_offset = 0;
    });
  }
  // A full-width dataset name (no NUL) is read as its 24 characters: no such
  // dataset, so reading the snapshot fails cleanly.
  RewriteRawIndex(path, [&](hid_t, std::vector<RawIndexRow>* rows, std::vector<std::int64_t>*) {
    std::memset((*rows)[0].dataset, 'x', kRawDatasetChars);
  });
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  const Status refreshed = (*trial)->Refresh();
  const Status read = refreshed.ok() ? (*trial)->raw("big", 0).status() : refreshed;
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find(std::string(kRawDatasetChars, 'x')), std::string::npos)
      << read.message();
}

// CLOSED markers of format_version 1 (runs written before version 2) still
// close their worker (a marker is JSON: no variable-length HDF5 data); a
// version this reader does not know is reported by Refresh, naming the
// marker and the version.
}  // namespace
}  // namespace tstat::io::testing
