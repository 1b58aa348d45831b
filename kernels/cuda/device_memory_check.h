// DeviceMemoryCheck: is a tensor's data readable by the GPU it is said to be
// on? Run before any kernel or copy touches it, because reading memory that is
// not (a freed allocation, pageable host memory, another GPU's memory without
// peer access) is a device fault that ends the CUDA context, i.e. training.
//
// Check(data, bytes, device) asks the driver what `data` is:
//   device memory of `device`:   OK when [data, data + bytes) lies inside one
//                                live allocation (cuMemGetAddressRange);
//   device memory of another GPU, pageable host memory, a freed allocation,
//   or a range that runs past its allocation: kInvalidArgument naming what
//   was found;
//   pinned host or managed memory: OK (the GPU reads it through the bus).
// Allocations found live are remembered until Reset(): call it once per
// batch, so tensors that share an allocation (a caching allocator's segment)
// cost one driver query per batch, and a free between batches is seen.
// Thread safety: one thread at a time per instance. Needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tstat/status.h"

namespace tstat::kernels {

class DeviceMemoryCheck {
 public:
  DeviceMemoryCheck();
  // `what` names the pointer in messages ("tensor.data").
  Status Check(const void* data, std::size_t bytes, int device, const char* what = "tensor.data");
  void Reset() { live_.clear(); }
  // Driver queries made since construction (tests, benchmarks).
  std::uint64_t queries() const { return queries_; }

 private:
  using AddressRangeFn = int (*)(unsigned long long* base, std::size_t* size,
                                 unsigned long long ptr);
  AddressRangeFn address_range_ = nullptr;  // cuMemGetAddressRange; null if unavailable
  // Live allocations of this batch: (begin, end, device), sorted by begin.
  struct Range {
    std::uintptr_t begin, end;
    int device;
  };
  std::vector<Range> live_;
  // The first live range that begins after `p` (where a range at p goes).
  std::vector<Range>::iterator FirstAfter(std::uintptr_t p);
  std::uint64_t queries_ = 0;
};

}  // namespace tstat::kernels
