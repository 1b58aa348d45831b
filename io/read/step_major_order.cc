// See step_major_order.h.
#include "io/read/step_major_order.h"

#include <algorithm>
#include <numeric>

namespace tstat::io {
namespace {

// Sorting by (global step, position), for rows a writer would not store.
void SortOrder(const SegmentBuffers& b, std::vector<std::uint32_t>* order) {
  std::iota(order->begin(), order->end(), 0u);
  const bool positions = b.stats_capture_index.size() == b.stats.size();
  std::stable_sort(order->begin(), order->end(), [&](std::uint32_t x, std::uint32_t y) {
    const std::int64_t gx = b.stats[x].global_step, gy = b.stats[y].global_step;
    if (gx != gy) return gx < gy;
    return positions && b.stats_capture_index[x] < b.stats_capture_index[y];
  });
}

}  // namespace

bool StepsAscend(const std::vector<StepRow>& steps) {
  for (std::size_t i = 1; i < steps.size(); ++i) {
    if (steps[i - 1].global_step >= steps[i].global_step) return false;
  }
  return true;
}

std::ptrdiff_t FindStep(const std::vector<StepRow>& steps, std::int64_t global_step,
                        std::size_t hint) {
  if (hint < steps.size() && steps[hint].global_step == global_step) {
    return static_cast<std::ptrdiff_t>(hint);
  }
  if (hint + 1 < steps.size() && steps[hint + 1].global_step == global_step) {
    return static_cast<std::ptrdiff_t>(hint + 1);
  }
  auto it = std::lower_bound(steps.begin(), steps.end(), global_step,
                             [](const StepRow& s, std::int64_t g) { return s.global_step < g; });
  if (it == steps.end() || it->global_step != global_step) return -1;
  return it - steps.begin();
}

void StepMajorOrder(const SegmentBuffers& b, std::vector<std::uint32_t>* order) {
  const std::size_t n = b.stats.size();
  order->resize(n);
  if (b.stats_capture_index.empty()) {  // stored in capture order
    std::iota(order->begin(), order->end(), 0u);
    bool ascending = true;
    for (std::size_t i = 1; i < n && ascending; ++i) {
      ascending = b.stats[i - 1].global_step <= b.stats[i].global_step;
    }
    if (!ascending) SortOrder(b, order);
    return;
  }
  if (b.stats_capture_index.size() != n) return SortOrder(b, order);
  // Bucket each row by its step (the steps table, ascending as written; a
  // tensor's rows are consecutive steps, so the next step is tried first),
  // then place it at its position within the step.
  const std::vector<StepRow>& steps = b.steps;
  if (!StepsAscend(steps)) return SortOrder(b, order);
  std::vector<std::uint32_t> bucket(n);
  std::vector<std::uint32_t> start(steps.size() + 1, 0);
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::ptrdiff_t found = FindStep(steps, b.stats[i].global_step, k);
    if (found < 0) return SortOrder(b, order);
    k = static_cast<std::size_t>(found);
    bucket[i] = static_cast<std::uint32_t>(k);
    ++start[k + 1];
  }
  for (std::size_t s = 1; s < start.size(); ++s) start[s] += start[s - 1];
  constexpr std::uint32_t kEmpty = ~0u;
  std::fill(order->begin(), order->end(), kEmpty);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t s = bucket[i];
    const std::uint64_t slot = std::uint64_t{start[s]} + b.stats_capture_index[i];
    if (slot >= start[s + 1] || (*order)[slot] != kEmpty) return SortOrder(b, order);
    (*order)[slot] = static_cast<std::uint32_t>(i);
  }
}

}  // namespace tstat::io
