// How a batch of tensors is cut into work for one CUDA launch, which elements
// each thread visits, and in what order partial results merge. Shared by the
// CUDA kernels and by the CPU code that emulates them in tests, so the
// partitioning logic is exercised without a GPU.
//
// Layout of one launch: every tensor is cut into chunks (WorkItem); one CUDA
// block reduces one chunk into one StatsPartial; a second small kernel merges
// each tensor's chunk partials in chunk order. Inside a chunk, thread t of T
// visits (1) scalar head elements t, t+T, ... up to the first 16-byte boundary,
// (2) 16-byte vectors t, t+T, ..., (3) scalar tail elements, in that order.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace tstat::kernels {

inline constexpr int kVectorBytes = 16;
// Chunks never hold fewer than kMinChunkElems elements (so a block has real
// work) and a tensor never has more than kMaxChunksPerTensor chunks (so the
// partial buffer stays small even for 2^40 elements: chunk size grows instead).
inline constexpr std::int64_t kMinChunkElems = 16384;
inline constexpr std::int64_t kMaxChunksPerTensor = 2048;

struct WorkItem {
  std::uint32_t request;  // index into the batch
  std::uint32_t slot;     // partial slot of this chunk (chunk order within the tensor)
  std::int64_t begin;     // first element of the chunk
  std::int64_t length;    // elements in the chunk
};

// Elements per chunk for a tensor of n elements: a multiple of 16, so every
// chunk starts at the same 16-byte alignment phase as the tensor itself.
TSTAT_HD std::int64_t ChunkElems(std::int64_t n) {
  std::int64_t c = (n + kMaxChunksPerTensor - 1) / kMaxChunksPerTensor;
  if (c < kMinChunkElems) c = kMinChunkElems;
  return (c + 15) / 16 * 16;
}
TSTAT_HD std::int64_t NumChunks(std::int64_t n) {
  if (n <= 0) return 0;
  const std::int64_t c = ChunkElems(n);
  return (n + c - 1) / c;
}

// The vector/scalar split of one chunk that starts at byte address `addr`.
struct ChunkSplit {
  std::int64_t head;     // scalar elements before the first 16-byte boundary
  std::int64_t vectors;  // whole 16-byte vectors after the head
  std::int64_t per_vec;  // elements per vector (16 / element size)
  std::int64_t tail_begin;
  std::int64_t length;
};

TSTAT_HD ChunkSplit SplitChunk(std::uintptr_t addr, std::int64_t length, int elem_size) {
  ChunkSplit s;
  s.length = length;
  s.per_vec = kVectorBytes / elem_size;
  if (elem_size > kVectorBytes || addr % static_cast<std::uintptr_t>(elem_size) != 0) {
    // Not even element-aligned (or wider than a vector): all scalar.
    s.head = length;
    s.vectors = 0;
    s.per_vec = 1;
    s.tail_begin = length;
    return s;
  }
  const std::int64_t mis = static_cast<std::int64_t>(addr % kVectorBytes);
  std::int64_t head = mis == 0 ? 0 : (kVectorBytes - mis) / elem_size;
  if (head > length) head = length;
  s.head = head;
  s.vectors = (length - head) / s.per_vec;
  s.tail_begin = head + s.vectors * s.per_vec;
  return s;
}

// Calls scalar(i) for each scalar element and vector(first) for each vector
// (elements first .. first+per_vec-1) that thread t of T visits, in the order
// the kernel visits them. Indices are relative to the chunk start.
template <class ScalarFn, class VectorFn>
TSTAT_HD void VisitChunk(const ChunkSplit& s, int t, int T, ScalarFn&& scalar, VectorFn&& vector) {
  for (std::int64_t i = t; i < s.head; i += T) scalar(i);
  for (std::int64_t v = t; v < s.vectors; v += T) vector(s.head + v * s.per_vec);
  for (std::int64_t i = s.tail_begin + t; i < s.length; i += T) scalar(i);
}

// ---------------------------------------------------------------------------
// Merge order inside a block, as cub::BlockReduce with
// BLOCK_REDUCE_WARP_REDUCTIONS performs it for a full block: each warp reduces
// with shuffles at offsets 1, 2, 4, 8, 16 (lane i combines with lane i+offset,
// the lower lane's value first), then thread 0 folds the warp aggregates in
// warp order. BlockMergeOrder() reproduces that order on the host over an array
// of per-thread partials (T a multiple of 32).
// WarpMergeOrder() is the warp stage alone: lane[0] ends up holding the
// warp's aggregate (the other lanes are overwritten).
template <class P, class Op>
void WarpMergeOrder(P* lane, Op op) {
  for (int offset = 1; offset < 32; offset *= 2) {
    for (int i = 0; i + offset < 32; i += 2 * offset) lane[i] = op(lane[i], lane[i + offset]);
  }
}
template <class P, class Op>
P BlockMergeOrder(P* per_thread, int T, Op op) {
  for (int w = 0; w < T / 32; ++w) WarpMergeOrder(per_thread + w * 32, op);
  P acc = per_thread[0];
  for (int w = 1; w < T / 32; ++w) acc = op(acc, per_thread[w * 32]);
  return acc;
}

// Chunk partials folded in chunk order.
template <class P, class Op>
TSTAT_HD P MergeChunks(const P* partials, std::int64_t count, P identity, Op op) {
  P acc = identity;
  for (std::int64_t i = 0; i < count; ++i) acc = op(acc, partials[i]);
  return acc;
}

// Per-tensor final merge of the stats partials, done by one warp: lane l of
// kMergeLanes folds its run of consecutive chunks in chunk order
// (MergeLaneChunks), then the lanes combine in warp-reduction order
// (WarpMergeOrder). A tensor of 2,048 chunks then costs 64 dependent merges
// instead of 2,048 on one thread. MergeChunksWarpOrder is the host's copy.
inline constexpr int kMergeLanes = 32;
TSTAT_HD std::int64_t MergeLaneBegin(std::int64_t count, int lane) {
  const std::int64_t per = (count + kMergeLanes - 1) / kMergeLanes;
  const std::int64_t begin = per * lane;
  return begin < count ? begin : count;
}
template <class P, class Op>
TSTAT_HD P MergeLaneChunks(const P* partials, std::int64_t count, int lane, P identity, Op op) {
  const std::int64_t begin = MergeLaneBegin(count, lane);
  return MergeChunks(partials + begin, MergeLaneBegin(count, lane + 1) - begin, identity, op);
}
template <class P, class Op>
P MergeChunksWarpOrder(const P* partials, std::int64_t count, P identity, Op op) {
  P lanes[kMergeLanes];
  for (int l = 0; l < kMergeLanes; ++l)
    lanes[l] = MergeLaneChunks(partials, count, l, identity, op);
  WarpMergeOrder(lanes, op);
  return lanes[0];
}

// ---------------------------------------------------------------------------
// Per-channel geometry: a tensor viewed as [outer, C, inner]; channel c holds
// elements (o*C + c)*inner + i.
struct ChannelGeometry {
  std::int64_t outer, channels, inner;
};
TSTAT_HD std::int64_t ChannelElementIndex(const ChannelGeometry& g, std::int64_t o, std::int64_t c,
                                          std::int64_t i) {
  return (o * g.channels + c) * g.inner + i;
}

}  // namespace tstat::kernels
