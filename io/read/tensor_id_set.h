// TensorIdSet: the tensor ids of a registry, for the per-row check that a
// row's tensor is registered. Sessions give ids densely from 0, so ids below
// kDenseIds are bits (a test per row, no hashing); larger ones (a crafted
// or hand-made registry) go to a hash set.
// Thread safety: none.
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

namespace tstat::io {

class TensorIdSet {
 public:
  static constexpr std::uint32_t kDenseIds = 1u << 22;  // 512 KiB of bits at most

  void Insert(std::uint32_t id) {
    if (id >= kDenseIds) {
      sparse_.insert(id);
      return;
    }
    if (dense_.size() <= id) dense_.resize(std::size_t{id} + 1, false);
    dense_[id] = true;
  }
  bool Contains(std::uint32_t id) const {
    if (id < dense_.size()) return dense_[id];
    return id >= kDenseIds && sparse_.count(id) != 0;
  }

 private:
  std::vector<bool> dense_;
  std::unordered_set<std::uint32_t> sparse_;
};

}  // namespace tstat::io
