// TrimmedBins: ExponentBins(h) built in a recycled buffer. Each record's
// trimmed exponent histogram was a fresh heap vector allocated on the
// training thread and freed on the writer thread, 1,000 per step at 1,000
// tensors: malloc and its cross-thread consolidation were ~9% of the training
// thread's samples. The pipeline hands the writer's finished buffers back
// (Pipeline::TakeSpareBins) and EndStep fills them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tstat/stats.h"

namespace tstat::host {

// The same range and counts as ExponentBins(h) (only h's span is read),
// stored in `buffer`'s memory (its contents are discarded).
inline ExponentBins TrimmedBins(const ExponentHistogram& h, std::vector<std::uint64_t> buffer) {
  const int lo = std::clamp<int>(h.span_begin, 0, kExpHistBins);
  const int hi = std::clamp<int>(h.span_end, lo, kExpHistBins);
  const NonZeroBins range = FindNonZeroBins(h.counts.data() + lo, hi - lo);
  ExponentBins out;
  out.first_bin = range.count ? lo + range.first : 0;
  out.counts = std::move(buffer);
  out.counts.assign(h.counts.begin() + out.first_bin,
                    h.counts.begin() + out.first_bin + range.count);
  return out;
}

}  // namespace tstat::host
