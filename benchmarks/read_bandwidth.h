// The reference for "how fast can this machine read memory": the simplest
// vectorizable loop that must touch every byte, an XOR-reduction of 64-bit
// words split over OpenMP threads. The stats throughput is reported relative
// to it, so both run on the same buffer with the same thread count.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tstat::bench {

// XOR of all 8-byte words of `data` (plus the trailing bytes), computed with
// `threads` OpenMP threads (0: OpenMP's default). The result feeds a volatile
// sink so the compiler cannot drop the loop. Thread safety: reentrant.
std::uint64_t XorReduce(const void* data, std::size_t bytes, int threads);

// Threads that `threads` resolves to (0 -> DefaultCpuThreads()).
int ResolveThreads(int threads);

}  // namespace tstat::bench
