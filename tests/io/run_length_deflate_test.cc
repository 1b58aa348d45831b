// RunLengthDeflater (io/run_length_deflate.h) against zlib's inflate, the
// decoder HDF5's deflate filter uses: every input decodes to itself, through
// run lengths at the length-code boundaries, block boundaries, stored and
// dynamic blocks, blocks cut at plane boundaries, and the output stays within
// Bound(); planes of random bytes are stored, others coded.
#include "io/codec/run_length_deflate.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tstat::io {
namespace {

std::vector<std::uint8_t> Compress(const std::vector<std::uint8_t>& in, std::size_t period = 0,
                                   std::size_t plane_bytes = 0) {
  RunLengthDeflater deflater;
  std::vector<std::uint8_t> out(RunLengthDeflater::Bound(in.size()) + 64, 0xAB);
  const std::size_t n = deflater.Compress(in.data(), in.size(), out.data(), period, plane_bytes);
  EXPECT_LE(n, RunLengthDeflater::Bound(in.size()));
  for (std::size_t i = n; i < out.size(); ++i) {  // nothing written past the end
    if (out[i] != 0xAB) {
      ADD_FAILURE() << "byte " << i << " written past the reported size " << n;
      break;
    }
  }
  out.resize(n);
  return out;
}

// zlib's inflate of `z`, which must be one complete zlib stream.
std::vector<std::uint8_t> Inflate(const std::vector<std::uint8_t>& z, std::size_t expected) {
  std::vector<std::uint8_t> back(expected + 1);
  z_stream s{};
  EXPECT_EQ(inflateInit(&s), Z_OK);
  s.next_in = const_cast<Bytef*>(z.data());
  s.avail_in = static_cast<uInt>(z.size());
  s.next_out = back.data();
  s.avail_out = static_cast<uInt>(back.size());
  const int rc = inflate(&s, Z_FINISH);
  EXPECT_EQ(rc, Z_STREAM_END) << (s.msg ? s.msg : "");
  EXPECT_EQ(s.avail_in, 0u) << "bytes after the stream";
  back.resize(s.total_out);
  inflateEnd(&s);
  return back;
}

void ExpectRoundTrip(const std::vector<std::uint8_t>& in, const std::string& what,
                     std::size_t period = 0, std::size_t plane_bytes = 0) {
  SCOPED_TRACE(what + " (" + std::to_string(in.size()) + " bytes, period " +
               std::to_string(period) + ", planes of " + std::to_string(plane_bytes) + ")");
  const std::vector<std::uint8_t> z = Compress(in, period, plane_bytes);
  ASSERT_GE(z.size(), 6u);
  EXPECT_EQ(z[0], 0x78);
  EXPECT_EQ((z[0] * 256 + z[1]) % 31, 0);
  const std::vector<std::uint8_t> back = Inflate(z, in.size());
  ASSERT_EQ(back.size(), in.size());
  EXPECT_TRUE(back == in);
}

TEST(RunLengthDeflateTest, EmptyAndTinyInputs) {
  ExpectRoundTrip({}, "empty");
  ExpectRoundTrip({7}, "one byte");
  ExpectRoundTrip({7, 7}, "two equal bytes");
  ExpectRoundTrip({7, 7, 7, 7}, "a run of 3 after the first byte");
  ExpectRoundTrip({0, 1, 2, 3, 4}, "no runs");
}

// Every run length from 1 to 600 covers each length symbol, its extra bits,
// 258 + 1 and 258 + 2 (a remainder below the minimum match of 3).
TEST(RunLengthDeflateTest, EveryRunLengthUpTo600) {
  std::vector<std::uint8_t> in;
  for (int run = 1; run <= 600; ++run)
    in.insert(in.end(), static_cast<std::size_t>(run), static_cast<std::uint8_t>(run * 37));
  ExpectRoundTrip(in, "runs 1..600");
}

TEST(RunLengthDeflateTest, BlockBoundaries) {
  const std::size_t b = RunLengthDeflater::kBlockBytes;
  for (std::size_t size : {b - 1, b, b + 1, 2 * b, 3 * b + 5}) {
    ExpectRoundTrip(std::vector<std::uint8_t>(size, 0), "zeros");
    std::vector<std::uint8_t> runs(size);
    for (std::size_t i = 0; i < size; ++i) runs[i] = static_cast<std::uint8_t>((i / 1000) % 3);
    ExpectRoundTrip(runs, "runs across blocks");
  }
}

TEST(RunLengthDeflateTest, RandomBytesAreStoredNotExpanded) {
  std::mt19937 rng(11);
  std::vector<std::uint8_t> in(200000);
  for (auto& x : in) x = static_cast<std::uint8_t>(rng());
  const std::vector<std::uint8_t> z = Compress(in);
  // Stored blocks: 5 bytes per 32 KB block, plus the zlib header and trailer.
  EXPECT_LE(z.size(), in.size() + 5 * (in.size() / RunLengthDeflater::kBlockBytes + 1) + 6);
  ExpectRoundTrip(in, "random");
}

TEST(RunLengthDeflateTest, RunsCompressAndSkewedLiteralsGetShortCodes) {
  std::vector<std::uint8_t> zeros(1 << 20, 0);
  // 32 blocks, each a header of ~15 bytes (code lengths) and 127 matches of
  // 258 at 2 bits (a 1-bit length code, a 1-bit distance): ~46 bytes a block.
  EXPECT_LT(Compress(zeros).size(), 1600u);
  ExpectRoundTrip(zeros, "1 MiB of zeros");
  // Few distinct values without runs: Huffman codes of ~2 bits, not 8.
  std::mt19937 rng(5);
  std::vector<std::uint8_t> skewed(100000);
  for (auto& x : skewed) x = static_cast<std::uint8_t>(0x3F + (rng() % 4 == 0));
  for (std::size_t i = 1; i < skewed.size(); i += 2) skewed[i] = 0x40;  // break runs
  EXPECT_LT(Compress(skewed).size(), skewed.size() / 3);
  ExpectRoundTrip(skewed, "skewed literals");
}

// Many distinct symbols with a steep frequency fall-off need code lengths
// over 15 bits before the limit is enforced.
TEST(RunLengthDeflateTest, LengthLimitedCodesWithFibonacciFrequencies) {
  std::vector<std::uint8_t> in;
  std::uint64_t a = 1, b = 1;
  for (int symbol = 0; symbol < 25; ++symbol) {
    for (std::uint64_t k = 0; k < a; ++k) {
      in.push_back(static_cast<std::uint8_t>(symbol));
      in.push_back(static_cast<std::uint8_t>(200 + symbol % 2));  // no runs
    }
    const std::uint64_t c = a + b;
    a = b;
    b = c;
    if (in.size() > RunLengthDeflater::kBlockBytes) break;
  }
  ExpectRoundTrip(in, "fibonacci frequencies");
}

// Mixed runs and noise at many random shapes; each must decode exactly.
TEST(RunLengthDeflateTest, RandomMixturesOfRunsAndNoise) {
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::uint8_t> in;
    const std::size_t size = rng() % 100000;
    while (in.size() < size) {
      const std::size_t len = 1 + rng() % (rng() % 2 ? 600 : 8);
      if (rng() % 3 == 0) {
        for (std::size_t k = 0; k < len; ++k) in.push_back(static_cast<std::uint8_t>(rng()));
      } else {
        in.insert(in.end(), len, static_cast<std::uint8_t>(rng() % 4));
      }
    }
    ExpectRoundTrip(in, "trial " + std::to_string(trial));
    if (::testing::Test::HasFailure()) break;
  }
}

// A shuffled plane of a table: `rows` rows per step over `steps` steps,
// each row's byte fixed per row (the same tensor's constant bytes) except
// where `change` of 256 picks a new value (a mantissa byte that moved).
std::vector<std::uint8_t> Plane(std::size_t rows, std::size_t steps, unsigned change,
                                std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> row(rows);
  for (auto& x : row) x = static_cast<std::uint8_t>(rng());
  std::vector<std::uint8_t> plane;
  for (std::size_t s = 0; s < steps; ++s) {
    for (auto& x : row) {
      if (rng() % 256 < change) x = static_cast<std::uint8_t>(rng());
    }
    plane.insert(plane.end(), row.begin(), row.end());
  }
  return plane;
}

// Matches a period back: every distance symbol's base, extra bits and the
// largest distance, with the rows repeating across block boundaries; each
// decodes exactly (zlib), and the right period compresses what runs alone
// cannot.
TEST(RunLengthDeflateTest, MatchesAPeriodBackAtEveryDistanceSymbol) {
  for (std::size_t period : {2, 3, 4, 5, 6, 7, 8, 13, 24, 100, 257, 1000, 1024, 4097, 12289, 24576,
                             24577, 32767, 32768}) {
    const std::size_t steps = std::max<std::size_t>(8, 100000 / period);
    const std::vector<std::uint8_t> plane = Plane(period, steps, 8, 7 + period);
    ExpectRoundTrip(plane, "plane", period);
    if (period >= 24) {  // random rows: no runs to find without the period
      EXPECT_LT(Compress(plane, period).size(), plane.size() / 4) << "period " << period;
      EXPECT_GT(Compress(plane).size(), plane.size() * 9 / 10) << "period " << period;
    }
    if (::testing::Test::HasFailure()) break;
  }
}

// Periods the encoder cannot use (0, 1, over the 32 KB window) or that do
// not fit the data give valid streams of runs only.
TEST(RunLengthDeflateTest, UnusablePeriodsAreIgnored) {
  const std::vector<std::uint8_t> plane = Plane(1000, 40, 16, 3);
  const std::size_t runs_only = Compress(plane).size();
  for (std::size_t period : {0, 1, 32769, 100000, 1 << 30}) {
    ExpectRoundTrip(plane, "plane", period);
    EXPECT_EQ(Compress(plane, period).size(), runs_only) << "period " << period;
  }
  ExpectRoundTrip({1, 2, 3}, "shorter than the period", 8);
  ExpectRoundTrip({}, "empty", 8);
}

// Runs and period matches mixed: whichever is longer wins at each byte,
// with match lengths at every length symbol either way.
TEST(RunLengthDeflateTest, RandomMixturesOfRunsNoiseAndPeriodicRows) {
  std::mt19937 rng(2027);
  for (int trial = 0; trial < 100; ++trial) {
    const std::size_t period = 2 + rng() % 3000;
    std::vector<std::uint8_t> in;
    const std::size_t size = rng() % 150000;
    while (in.size() < size) {
      const std::size_t len = 1 + rng() % (rng() % 2 ? 600 : 8);
      const unsigned kind = rng() % 4;
      if (kind == 0) {
        for (std::size_t k = 0; k < len; ++k) in.push_back(static_cast<std::uint8_t>(rng()));
      } else if (kind == 1) {
        in.insert(in.end(), len, static_cast<std::uint8_t>(rng() % 4));
      } else {  // a copy of what was a period back (byte by byte: it may overlap)
        for (std::size_t k = 0; k < len; ++k) {
          in.push_back(in.size() >= period ? in[in.size() - period]
                                           : static_cast<std::uint8_t>(rng()));
        }
      }
    }
    ExpectRoundTrip(in, "trial " + std::to_string(trial), period);
    // Cut into planes of several lengths (some below kMinPlaneBytes, some
    // longer than a block), noise pieces among them.
    const std::size_t planes[] = {1, 63, 64, 100, 414, 1 + rng() % 5000, 40000};
    ExpectRoundTrip(in, "trial " + std::to_string(trial), period, planes[trial % 7]);
    if (::testing::Test::HasFailure()) break;
  }
}

// Whether `needle` occurs in `haystack` byte for byte: a stored block
// carries its bytes as they are, a coded one does not.
bool Contains(const std::vector<std::uint8_t>& haystack, const std::uint8_t* needle,
              std::size_t n) {
  return std::search(haystack.begin(), haystack.end(), needle, needle + n) != haystack.end();
}

// A shuffled chunk of `rows` elements of 16 bytes: planes 0-5 random (the
// low mantissa bytes of noisy doubles), planes 6-7 a slowly drifting byte
// and a byte of 16 values (few distinct values), planes 8-15 zero.
std::vector<std::uint8_t> ShuffledChunk(std::size_t rows, std::mt19937* rng) {
  std::vector<std::uint8_t> in(rows * 16, 0);
  for (std::size_t j = 0; j < 6; ++j) {
    for (std::size_t i = 0; i < rows; ++i) in[j * rows + i] = static_cast<std::uint8_t>((*rng)());
  }
  for (std::size_t i = 0; i < rows; ++i) {
    in[6 * rows + i] = static_cast<std::uint8_t>(100 + i / 50);
    in[7 * rows + i] = static_cast<std::uint8_t>((*rng)() % 16);
  }
  return in;
}

TEST(RunLengthDeflateTest, PlanesOfNoiseAreStoredAsTheyAre) {
  std::mt19937 rng(28);
  const std::size_t rows = 414;  // a 64 KB stats chunk's planes
  const std::vector<std::uint8_t> in = ShuffledChunk(rows, &rng);
  ExpectRoundTrip(in, "planes", 0, rows);
  const std::vector<std::uint8_t> planes = Compress(in, 0, rows);
  const std::vector<std::uint8_t> blocks = Compress(in);
  // The six noise planes, in one stored block; not without planes.
  EXPECT_TRUE(Contains(planes, in.data(), 6 * rows));
  EXPECT_FALSE(Contains(blocks, in.data(), 64));
  // The plane of 16 values is coded (4 bits a byte, not 8), the zeros are runs:
  // no larger than one coded block for all of it but for block headers.
  EXPECT_FALSE(Contains(planes, in.data() + 7 * rows, 64));
  EXPECT_LT(planes.size(), 6 * rows + rows / 2 + 200);
  EXPECT_LE(planes.size(), blocks.size() + 64);
}

TEST(RunLengthDeflateTest, ShortRunsOfNoiseStayInTheCodedBlock) {
  // Planes of 200 bytes: six noise planes are 1,200 bytes, at least
  // kMinStoredRun; two (400 bytes) are too short to pay for a block of
  // their own, as are noise planes shorter than kMinPlaneBytes.
  static_assert(RunLengthDeflater::kMinStoredRun <= 1200, "six planes of 200 bytes");
  static_assert(RunLengthDeflater::kMinStoredRun > 400, "two planes of 200 bytes");
  std::mt19937 rng(29);
  std::vector<std::uint8_t> in = ShuffledChunk(200, &rng);
  EXPECT_TRUE(Contains(Compress(in, 0, 200), in.data(), 1200));
  std::fill(in.begin() + 400, in.begin() + 1200, std::uint8_t{0});  // planes 2-5: zeros
  const std::vector<std::uint8_t> z = Compress(in, 0, 200);
  EXPECT_FALSE(Contains(z, in.data(), 400));
  ExpectRoundTrip(in, "two noise planes", 0, 200);
  std::vector<std::uint8_t> small = ShuffledChunk(RunLengthDeflater::kMinPlaneBytes - 1, &rng);
  EXPECT_FALSE(Contains(Compress(small, 0, RunLengthDeflater::kMinPlaneBytes - 1), small.data(),
                        5 * (RunLengthDeflater::kMinPlaneBytes - 1)));
}

}  // namespace
}  // namespace tstat::io
