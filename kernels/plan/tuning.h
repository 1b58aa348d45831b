// LaunchPolicy: the fixed launch geometry of the CUDA backend.
//
// Every number that shapes a launch lives here, as compile-time constants, so
// that the geometry (and with it the floating-point merge order) is fixed for a
// build: results are bitwise reproducible run to run. The CPU emulation of the
// backend (kernels/emulated_backend.h) reads the same constants; only the
// threads per block of the stats/channel/histogram kernels can be varied there
// (to test other block sizes), the device build instantiates kThreadsPerBlock.
// Plain C++ (no CUDA headers); thread-safe (constants only).
#pragma once

#include <cstdint>

namespace tstat::kernels {

struct LaunchPolicy {
  // Threads of a block of the stats, channel, linear-histogram and label
  // kernels. 256 = 8 warps: enough in flight per block to cover memory latency
  // with 16-byte loads, small enough that 8 blocks fit one H100/A100 SM
  // (2048 threads), and the cub::BlockReduce over a 136-byte StatsPartial stays
  // cheap (8 warp aggregates). A multiple of 32 (BlockMergeOrder needs full warps).
  static constexpr int kThreadsPerBlock = 256;
  // __launch_bounds__ minimum resident blocks per SM of the stats and channel
  // kernels. The per-thread state (StatsPartial + shifted sums, ~50 registers)
  // and the unrolled 16-byte vector decode need ~126 registers; asking for 3+
  // blocks makes ptxas spill inside the element loop (measured on sm_90:
  // 80 regs + 256 B spills at 3, 64 regs + 1.5 KiB at 4). The element loop is
  // ALU-heavy (~30 instructions per element), so 16 warps per SM with
  // 128-bit loads keep enough bytes in flight.
  static constexpr int kMinBlocksPerSm = 2;
  // Merge kernel: one warp per merged segment (kMergeLanes); a smaller block
  // keeps the tail of the grid short when there are few segments.
  static constexpr int kMergeThreadsPerBlock = 128;
  // Sample gather kernel: one thread per sampled element.
  static constexpr int kSampleThreadsPerBlock = 256;
  // Linear-histogram and label bins are counted in shared memory (uint32, then
  // added to the global uint64 counts) when a request has at most this many
  // bins: 8192 * 4 B = 32 KiB of dynamic shared memory, under the 48 KiB that
  // needs no opt-in and still 6-7 blocks per SM. More bins: global atomics.
  static constexpr int kSharedHistBins = 8192;
  // Per-channel: a channel whose contiguous runs (`inner`) hold at least this
  // many elements gets a block per (channel, outer range) whose threads walk
  // the runs (a warp reads >= 32 consecutive elements); below it a thread owns
  // a channel and neighbouring threads read neighbouring channels.
  static constexpr std::int64_t kWideChannelInner = 32;
  // The largest grid (blocks) one launch may use (gridDim.x limit).
  static constexpr std::int64_t kMaxGridBlocks = 2147483647;
  // A chunk is counted in 32-bit shared-memory bins, so it must hold fewer
  // than 2^32 elements: ChunkElems(n) <= 2^31 for n <= 2^42 (4 Ti elements,
  // far beyond any device's memory). Larger tensors get kNotSupported.
  static constexpr std::int64_t kMaxStatsNumel = std::int64_t{1} << 42;
};

}  // namespace tstat::kernels
