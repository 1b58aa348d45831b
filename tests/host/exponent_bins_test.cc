// ExponentBins (tstat/stats.h): the trimmed exponent histogram records carry.
// Expected values are hand-computed from the bins set.
#include <gtest/gtest.h>

#include <random>

#include "tstat/stats.h"

namespace tstat {
namespace {

ExponentHistogram Hist(std::initializer_list<std::pair<int, std::uint64_t>> bins) {
  ExponentHistogram h;
  for (const auto& [bin, n] : bins) h.counts[static_cast<std::size_t>(bin)] = n;
  return h;
}

TEST(ExponentBinsTest, KeepsTheNonZeroRangeOfAHistogram) {
  const ExponentBins b = Hist({{140, 3}, {142, 5}, {147, 1}});
  EXPECT_EQ(b.first_bin, 140);
  EXPECT_EQ(b.counts, (std::vector<std::uint64_t>{3, 0, 5, 0, 0, 0, 0, 1}));
  EXPECT_TRUE(b.valid());
  EXPECT_EQ(b[139], 0u);
  EXPECT_EQ(b[140], 3u);
  EXPECT_EQ(b[142], 5u);
  EXPECT_EQ(b[147], 1u);
  EXPECT_EQ(b[148], 0u);
  EXPECT_EQ(b[-5], 0u);
  EXPECT_EQ(b[5000], 0u);
  EXPECT_EQ(b.total(), 9u);
  EXPECT_EQ(b.Expand().counts, Hist({{140, 3}, {142, 5}, {147, 1}}).counts);
}

TEST(ExponentBinsTest, EdgeBinsAndEmptyHistograms) {
  const ExponentBins edges = Hist({{0, 2}, {kExpHistBins - 1, 4}});
  EXPECT_EQ(edges.first_bin, 0);
  EXPECT_EQ(edges.counts.size(), static_cast<std::size_t>(kExpHistBins));
  EXPECT_TRUE(edges.valid());
  EXPECT_EQ(edges[kExpHistBins - 1], 4u);
  const ExponentBins empty = ExponentHistogram{};
  EXPECT_TRUE(empty.counts.empty());
  EXPECT_TRUE(empty.valid());
  EXPECT_EQ(empty.total(), 0u);
  EXPECT_EQ(empty.Expand().total(), 0u);
}

// ExponentBins reads only the histogram's span (set by the engine): bins
// outside it are taken as zero, a span past the bins is clipped, and the
// default span reads every bin.
TEST(ExponentBinsTest, ReadsOnlyTheSpan) {
  ExponentHistogram h = Hist({{20, 1}, {30, 2}, {40, 4}, {200, 8}});
  const ExponentBins all = h;  // default span: [0, 279)
  EXPECT_EQ(all.first_bin, 20);
  EXPECT_EQ(all.counts.size(), 181u);
  EXPECT_EQ(all.total(), 15u);
  h.SetSpan();
  EXPECT_EQ(h.span_begin, 20);
  EXPECT_EQ(h.span_end, 201);
  EXPECT_TRUE(ExponentBins(h) == all);
  h.span_begin = 25;  // a narrower span: bins 20 and 200 are not read
  h.span_end = 41;
  const ExponentBins inner = h;
  EXPECT_EQ(inner.first_bin, 30);
  EXPECT_EQ(inner.counts, (std::vector<std::uint64_t>{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4}));
  h.span_begin = -7;  // clipped to the bins
  h.span_end = 1000;
  EXPECT_TRUE(ExponentBins(h) == all);
  h.span_begin = 41;  // empty and reversed spans read nothing
  h.span_end = 41;
  EXPECT_TRUE(ExponentBins(h).counts.empty());
  h.span_end = 3;
  EXPECT_TRUE(ExponentBins(h).counts.empty());
  EXPECT_EQ(ExponentBins(h).first_bin, 0);
  h.ClearSpan();
  EXPECT_TRUE(ExponentBins(h) == all);
  ExponentHistogram zero;
  zero.SetSpan();
  EXPECT_EQ(zero.span_begin, 0);
  EXPECT_EQ(zero.span_end, 0);
}

// Built in a recycled buffer (as EndStep does), the bins are exactly what the
// plain constructor gives, for random bins and spans (clipped, empty,
// reversed), whatever the buffer held before; SpanFirst/SpanLast clip.
TEST(ExponentBinsTest, BinsInARecycledBufferEqualTheConstructors) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bin(-20, kExpHistBins + 20);
  std::vector<std::uint64_t> buffer;
  for (int trial = 0; trial < 2000; ++trial) {
    ExponentHistogram h;
    const int set = trial % 7;
    for (int k = 0; k < set; ++k) {
      h.counts[static_cast<std::size_t>(std::clamp(bin(rng), 0, kExpHistBins - 1))] += 1 + trial;
    }
    if (trial % 3 == 0) {
      h.SetSpan();
    } else if (trial % 3 == 1) {
      h.span_begin = static_cast<std::int16_t>(bin(rng));
      h.span_end = static_cast<std::int16_t>(bin(rng));
    }
    const ExponentBins want = h;
    ASSERT_LE(0, h.SpanFirst());
    ASSERT_LE(h.SpanFirst(), h.SpanLast());
    ASSERT_LE(h.SpanLast(), kExpHistBins);
    const ExponentBins got(h, std::move(buffer));
    ASSERT_EQ(got.first_bin, want.first_bin) << "trial " << trial;
    ASSERT_EQ(got.counts, want.counts) << "trial " << trial;
    buffer = got.counts;  // stale contents for the next trial
    buffer.push_back(99);
  }
}

TEST(ExponentBinsTest, SumClipsToTheStoredRange) {
  const ExponentBins b = Hist({{10, 1}, {11, 2}, {12, 4}, {13, 8}});
  EXPECT_EQ(b.Sum(0, kExpHistBins), 15u);
  EXPECT_EQ(b.Sum(0, 12), 3u);    // bins 10, 11
  EXPECT_EQ(b.Sum(12, 13), 4u);   // bin 12
  EXPECT_EQ(b.Sum(13, 200), 8u);  // bin 13
  EXPECT_EQ(b.Sum(0, 10), 0u);    // below the range
  EXPECT_EQ(b.Sum(14, 279), 0u);  // above it
  EXPECT_EQ(b.Sum(12, 12), 0u);   // empty interval
  EXPECT_EQ(b.Sum(13, 11), 0u);   // reversed interval
}

TEST(ExponentBinsTest, ValidOnlyInsideTheBins) {
  ExponentBins b;
  b.first_bin = kExpHistBins - 2;
  b.counts = {1, 2};
  EXPECT_TRUE(b.valid());
  b.counts.push_back(3);
  EXPECT_FALSE(b.valid());
  b.first_bin = -1;
  b.counts = {1};
  EXPECT_FALSE(b.valid());
  b.first_bin = kExpHistBins;
  b.counts.clear();
  EXPECT_TRUE(b.valid());
}

TEST(ExponentBinsTest, EqualityComparesBinsNotRanges) {
  ExponentBins padded;
  padded.first_bin = 8;
  padded.counts = {0, 0, 1, 2, 0};
  const ExponentBins trimmed = Hist({{10, 1}, {11, 2}});
  EXPECT_EQ(padded, trimmed);
  ExponentBins other = trimmed;
  other.counts[1] = 3;
  EXPECT_NE(other, trimmed);
  ExponentBins shifted = trimmed;
  shifted.first_bin = 11;
  EXPECT_NE(shifted, trimmed);
  EXPECT_EQ(ExponentBins{}, ExponentBins(ExponentHistogram{}));
  EXPECT_NE(ExponentBins{}, trimmed);
}

}  // namespace
}  // namespace tstat
