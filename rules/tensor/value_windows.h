// ValueWindows: the last `window` values of many series (one per worker,
// mode and tensor), each a ring. Rings are carved from large blocks in the
// order their series are first seen (capture order), so a step's walk over
// its tensors reads them one after another instead of chasing one small
// allocation (a deque's, say) per tensor.
// Thread safety: none (a rule's state; the engine calls a rule from one
// thread at a time).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "rules/engine/rule_base.h"

namespace tstat::rules {

class ValueWindows {
 public:
  struct Ring {
    double* values = nullptr;  // `window` values in a block
    std::size_t head = 0;      // the oldest value once full; 0 until then
    std::size_t size = 0;

    // The values oldest to newest: values[head, window) then values[0, head)
    // when full, values[0, size) before.
    template <class F>
    void ForEach(std::size_t window, F f) const {
      const std::size_t n0 = size == window ? window - head : size;
      for (std::size_t k = 0; k < n0; ++k) f(values[head + k]);
      for (std::size_t k = 0; k < size - n0; ++k) f(values[k]);
    }
    void Push(double v, std::size_t window) {
      if (size < window) {
        values[size++] = v;
      } else {
        values[head] = v;
        head = head + 1 == window ? 0 : head + 1;
      }
    }
  };

  explicit ValueWindows(std::size_t window) : window_(std::max<std::size_t>(1, window)) {}
  std::size_t window() const { return window_; }

  // The ring of (group, id) (PerTensor's keys), empty when new.
  Ring& Get(std::uint64_t group, std::uint32_t id) {
    Ring& r = rings_.Get(group, id);
    if (r.values == nullptr) r.values = NewRing();
    return r;
  }

 private:
  double* NewRing() {
    constexpr std::size_t kBlockValues = 1 << 14;
    const std::size_t per_block = std::max<std::size_t>(1, kBlockValues / window_);
    if (blocks_.empty() || used_ == per_block) {
      blocks_.push_back(std::make_unique<double[]>(per_block * window_));
      used_ = 0;
    }
    return blocks_.back().get() + window_ * used_++;
  }

  std::size_t window_;
  PerTensor<Ring> rings_;
  std::vector<std::unique_ptr<double[]>> blocks_;
  std::size_t used_ = 0;  // rings carved from blocks_.back()
};

}  // namespace tstat::rules
