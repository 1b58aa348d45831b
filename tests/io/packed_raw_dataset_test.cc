// A segment's raw/packed dataset written while it fills (io/packed_raw_dataset.h):
// whatever the sizes appended -- pieces straddling chunk boundaries, totals
// one byte either side of a chunk, one append spanning several chunks -- the
// dataset read back through HDF5 holds exactly the bytes appended, in order,
// with the layout and filters docs/storage-format.md gives for its size and raw level.
#include "io/write/packed_raw_dataset.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "io/format/segment_schema.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_lock.h"
#include "tests/io/io_test_util.h"

namespace tstat::io {
namespace {

using testing::TempDir;

struct Stored {
  std::vector<std::uint8_t> bytes;
  H5D_layout_t layout = H5D_LAYOUT_ERROR;
  hsize_t chunk = 0;  // 0 unless chunked
  std::vector<H5Z_filter_t> filters;
  unsigned deflate_level = 0;
};

Stored ReadPacked(const std::string& path) {
  Stored out;
  H5Lock lock;
  H5File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_TRUE(file.valid()) << path;
  if (!file.valid()) return out;
  H5DataSet ds(H5Dopen2(file.get(), kRawPackedDataset, H5P_DEFAULT));
  EXPECT_TRUE(ds.valid()) << path;
  if (!ds.valid()) return out;
  auto dims = H5DatasetDims(ds.get(), path);
  EXPECT_TRUE(dims.ok() && dims->size() == 1);
  if (!dims.ok() || dims->size() != 1) return out;
  out.bytes.resize((*dims)[0]);
  if (!out.bytes.empty()) {
    EXPECT_GE(H5Dread(ds.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.bytes.data()),
              0);
  }
  H5Plist dcpl(H5Dget_create_plist(ds.get()));
  out.layout = H5Pget_layout(dcpl.get());
  if (out.layout == H5D_CHUNKED) H5Pget_chunk(dcpl.get(), 1, &out.chunk);
  const int n = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, values[4] = {0};
    std::size_t nvalues = 4;
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues,
                                           values, 0, nullptr, nullptr);
    out.filters.push_back(id);
    if (id == H5Z_FILTER_DEFLATE && nvalues > 0) out.deflate_level = values[0];
  }
  return out;
}

// Appends pieces of the given sizes of pseudo-random bytes to a new file's
// packed dataset, finishes it, closes the file; returns the bytes appended.
std::vector<std::uint8_t> WritePacked(const std::string& path, int level,
                                      const std::vector<std::size_t>& pieces) {
  std::mt19937_64 rng(pieces.size() * 131 + static_cast<unsigned>(level));
  std::vector<std::uint8_t> all;
  H5Lock lock;
  H5File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  EXPECT_TRUE(file.valid()) << path;
  PackedRawDataset packed;
  packed.Reset(level);
  for (std::size_t n : pieces) {
    std::vector<std::uint8_t> piece(n);
    // Compressible but not constant: small values with runs.
    for (std::size_t i = 0; i < n; ++i)
      piece[i] = static_cast<std::uint8_t>(rng() % 7 + (i / 97) % 3);
    EXPECT_EQ(packed.size(), all.size());
    const Status s = packed.Append(file.get(), piece.data(), piece.size(), path);
    EXPECT_TRUE(s.ok()) << s.ToString();
    all.insert(all.end(), piece.begin(), piece.end());
  }
  EXPECT_EQ(packed.size(), all.size());
  const Status s = packed.Finish(file.get(), path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(H5Fclose(file.release()), 0);
  return all;
}

// Pieces of 1..65535 bytes (as the writer packs) up to `total` bytes.
std::vector<std::size_t> RandomPieces(std::size_t total, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::size_t> pieces;
  std::size_t sum = 0;
  while (sum < total) {
    const std::size_t n = std::min<std::size_t>(total - sum, 1 + rng() % 65535);
    pieces.push_back(n);
    sum += n;
  }
  return pieces;
}

TEST(PackedRawDatasetTest, ReadsBackExactlyAtEverySizeAndLevel) {
  TempDir dir;
  const std::size_t C = kChunkBytes;
  struct Case {
    const char* name;
    std::vector<std::size_t> pieces;
  };
  const std::vector<Case> cases = {
      {"compact", {1000, 3000, 1}},
      {"chunk_minus_one", RandomPieces(C - 1, 1)},
      {"exactly_one_chunk", RandomPieces(C, 2)},
      {"chunk_plus_one", RandomPieces(C + 1, 3)},
      {"exactly_two_chunks_in_halves", {C / 2, C / 2, C / 2, C / 2}},
      {"one_append_spanning_chunks", {12, 5 * C / 2, 7}},
      {"three_chunks_and_a_tail", RandomPieces(3 * C + 12345, 4)},
      {"empty_pieces_between", {0, C - 3, 0, 6, 0}},
  };
  for (int level : {0, 6}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " at level " + std::to_string(level));
      const std::string path = dir.Sub(std::string(c.name) + std::to_string(level) + ".h5");
      const std::vector<std::uint8_t> written = WritePacked(path, level, c.pieces);
      const Stored stored = ReadPacked(path);
      ASSERT_EQ(stored.bytes.size(), written.size());
      EXPECT_TRUE(stored.bytes == written);
      // docs/storage-format.md: compact up to 8 KiB; one chunk or less: contiguous at
      // level 0, chunked + shuffle + deflate at 1..9; more: chunks of 1 MiB.
      if (written.size() <= kCompactBytes) {
        EXPECT_EQ(stored.layout, H5D_COMPACT);
        EXPECT_TRUE(stored.filters.empty());
        continue;
      }
      if (written.size() >= C) {
        EXPECT_EQ(stored.layout, H5D_CHUNKED);
        EXPECT_EQ(stored.chunk, C);
      } else {
        EXPECT_EQ(stored.layout, level == 0 ? H5D_CONTIGUOUS : H5D_CHUNKED);
      }
      if (level == 0) {
        EXPECT_TRUE(stored.filters.empty());
      } else {
        EXPECT_EQ(stored.filters,
                  (std::vector<H5Z_filter_t>{H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}));
        EXPECT_EQ(stored.deflate_level, 6u);
      }
    }
  }
}

// Nothing appended: no dataset at all, as before packing existed.
TEST(PackedRawDatasetTest, NothingAppendedWritesNoDataset) {
  TempDir dir;
  const std::string path = dir.Sub("none.h5");
  WritePacked(path, 0, {});
  H5Lock lock;
  H5File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_TRUE(file.valid());
  EXPECT_LE(H5Lexists(file.get(), kRawGroup, H5P_DEFAULT), 0);
}

}  // namespace
}  // namespace tstat::io
