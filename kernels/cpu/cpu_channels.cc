// Per-channel stats on the CPU, and the stat set of the same tensor from the
// same read. A tensor seen as [outer, channels, inner] holds each channel as
// `outer` runs of `inner` contiguous elements.
//
// Every channel goes through the stat-set tile kernels of the CPU backend in
// (outer, inner) order, and the whole tensor's stat set is the merge of its
// channels' in channel order (its exponent histogram the sum of theirs), so a
// tensor with per-channel stats is read once, not by the stat-set batch and
// again here. How a channel reaches the kernels depends on its runs:
// - runs of kTileElems or more (large feature maps) are handed over in place,
//   a tile at a time;
// - runs of kGatherMinRun or more (feature maps such as 8x8: 64 elements)
//   are copied end to end into a tile-sized buffer first, since a kernel
//   call costs about as much as reading a few hundred elements;
// - shorter runs (a linear layer's [batch, units]: runs of one) are
//   transposed kBlockChannels channels at a time: a chunk of rows of the
//   block becomes one run per channel, reduced, and merged into the
//   channel's partial in row order.
// Channels (or blocks of them) are split between threads; a channel's
// result depends on neither `workers` nor OpenMP's scheduling.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_passes.h"
#include "kernels/cpu/cpu_tile_call.h"
#include "kernels/cpu/cpu_tile_types.h"
#include "kernels/request_check.h"
#include "kernels/stats_ops.h"

namespace tstat::kernels::cpu {
namespace {

constexpr std::int64_t kGatherMinRun = 16;
constexpr std::int64_t kBlockChannels = 16;
constexpr std::int64_t kBlockRunElems = kTileElems / kBlockChannels;

struct ChannelShape {
  std::int64_t outer, channels, inner;
};

// A tile-sized buffer of elements of up to 8 bytes.
struct alignas(64) GatherBuffer {
  unsigned char bytes[kTileElems * 8];
};

// One thread's scratch.
struct ChannelScratch {
  TileState state;
  ExponentHistogram hist;  // the exponents of every channel this thread reduced
  GatherBuffer gather;
};

class ChannelReducer {
 public:
  ChannelReducer(const ReductionRequest& r, const TileKernels& kern, const ChannelShape& s)
      : base_(static_cast<const unsigned char*>(r.tensor.data)),
        elem_(DTypeSize(r.tensor.dtype)),
        s_(s),
        call_(MakeTileCall(r, kern)) {}

  // Work items: channels, or blocks of kBlockChannels channels.
  bool by_blocks() const { return s_.inner < kGatherMinRun; }
  std::int64_t items() const {
    return by_blocks() ? (s_.channels + kBlockChannels - 1) / kBlockChannels : s_.channels;
  }

  void Reduce(std::int64_t item, ChannelScratch* x, StatsPartial* partials) const {
    if (!by_blocks()) {
      partials[item] = Channel(item, x);
      return;
    }
    const std::int64_t c0 = item * kBlockChannels;
    Block(c0, std::min(s_.channels, c0 + kBlockChannels), x, partials);
  }

 private:
  const unsigned char* Run(std::int64_t oi, std::int64_t c) const {
    return base_ + static_cast<std::size_t>((oi * s_.channels + c) * s_.inner) * elem_;
  }
  unsigned char* Slot(GatherBuffer* g, std::int64_t i) const {
    return g->bytes + static_cast<std::size_t>(i) * elem_;
  }

  StatsPartial Channel(std::int64_t c, ChannelScratch* x) const {
    TileState* st = &x->state;
    st->Begin(call_.float_path, x->hist.counts.data());
    if (s_.inner >= kTileElems) {
      for (std::int64_t oi = 0; oi < s_.outer; ++oi) {
        for (std::int64_t b = 0; b < s_.inner; b += kTileElems) {
          call_(Run(oi, c) + static_cast<std::size_t>(b) * elem_,
                std::min(kTileElems, s_.inner - b), st);
        }
      }
    } else {
      std::int64_t filled = 0;
      for (std::int64_t oi = 0; oi < s_.outer; ++oi) {
        for (std::int64_t done = 0; done < s_.inner;) {
          const std::int64_t take = std::min(s_.inner - done, kTileElems - filled);
          std::memcpy(Slot(&x->gather, filled), Run(oi, c) + static_cast<std::size_t>(done) * elem_,
                      static_cast<std::size_t>(take) * elem_);
          done += take;
          filled += take;
          if (filled == kTileElems) {
            call_(x->gather.bytes, filled, st);
            filled = 0;
          }
        }
      }
      if (filled > 0) call_(x->gather.bytes, filled, st);
    }
    st->Flush();
    return st->partial;
  }

  // Channels [c0, c1) of runs shorter than kGatherMinRun, merged into their
  // `partials` (identities on entry): channel k of the block is gathered
  // into elements [k * kBlockRunElems, ...) of the buffer.
  void Block(std::int64_t c0, std::int64_t c1, ChannelScratch* x, StatsPartial* partials) const {
    const std::int64_t rows = std::max<std::int64_t>(1, kBlockRunElems / s_.inner);
    const std::size_t run_bytes = static_cast<std::size_t>(s_.inner) * elem_;
    for (std::int64_t r0 = 0; r0 < s_.outer; r0 += rows) {
      const std::int64_t r1 = std::min(s_.outer, r0 + rows);
      switch (run_bytes) {  // runs of one element: copies of a constant size
        case 1:
          Transpose<1>(r0, r1, c0, c1, x);
          break;
        case 2:
          Transpose<2>(r0, r1, c0, c1, x);
          break;
        case 4:
          Transpose<4>(r0, r1, c0, c1, x);
          break;
        case 8:
          Transpose<8>(r0, r1, c0, c1, x);
          break;
        default:
          Transpose<0>(r0, r1, c0, c1, x);
      }
      for (std::int64_t c = c0; c < c1; ++c) {
        TileState* st = &x->state;
        st->Begin(call_.float_path, x->hist.counts.data());
        call_(Slot(&x->gather, (c - c0) * kBlockRunElems), (r1 - r0) * s_.inner, st);
        st->Flush();
        partials[c] = Merge(partials[c], st->partial);
      }
    }
  }

  // Rows [r0, r1) of channels [c0, c1) into the buffer, channel by channel;
  // kRunBytes: the bytes of a run when a constant (0: not).
  template <std::size_t kRunBytes>
  void Transpose(std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1,
                 ChannelScratch* x) const {
    const std::size_t run_bytes =
        kRunBytes != 0 ? kRunBytes : static_cast<std::size_t>(s_.inner) * elem_;
    const std::size_t row_bytes = static_cast<std::size_t>(s_.channels) * run_bytes;
    const std::size_t channel_bytes = static_cast<std::size_t>(kBlockRunElems) * elem_;
    const unsigned char* row = Run(r0, c0);
    unsigned char* dst_row = x->gather.bytes;
    for (std::int64_t oi = r0; oi < r1; ++oi, row += row_bytes, dst_row += run_bytes) {
      const unsigned char* src = row;
      unsigned char* dst = dst_row;
      for (std::int64_t c = c0; c < c1; ++c, src += run_bytes, dst += channel_bytes) {
        std::memcpy(dst, src, run_bytes);
      }
    }
  }

  const unsigned char* base_;
  std::size_t elem_;
  ChannelShape s_;
  TileCall call_;
};

}  // namespace

bool ReducesWithPerChannel(const ReductionRequest& r) {
  return r.options.per_channel_axis >= 0 && r.options.label_classes == 0;
}

void ComputeStatsAndPerChannel(const ReductionRequest& r, int workers, const TileKernels& kern,
                               ReductionResult* out) {
  ChannelShape s;
  ChannelDims(r.tensor, r.options.per_channel_axis, &s.outer, &s.channels, &s.inner);
  PerChannelStats& pc = out->per_channel.emplace();
  pc.axis = r.options.per_channel_axis;
  pc.channels.assign(static_cast<std::size_t>(s.channels), TensorStats{});
  std::vector<StatsPartial> partials(static_cast<std::size_t>(s.channels),
                                     StatsPartial::Identity());
  ExponentHistogram total;
  if (r.tensor.numel > 0) {
    const ChannelReducer reducer(r, kern, s);
    const bool parallel = r.tensor.numel >= kParallelMinElems && reducer.items() > 1;
#pragma omp parallel num_threads(workers) if (parallel)
    {
      auto scratch = std::make_unique<ChannelScratch>();
      scratch->state.Init();
#pragma omp for schedule(static) nowait
      for (std::int64_t item = 0; item < reducer.items(); ++item) {
        reducer.Reduce(item, scratch.get(), partials.data());
      }
#pragma omp critical(tstat_channel_histograms)
      for (int b = 0; b < kExpHistBins; ++b) total.counts[b] += scratch->hist.counts[b];
    }
  }
  StatsPartial all = StatsPartial::Identity();
  for (std::int64_t c = 0; c < s.channels; ++c) {
    const StatsPartial& p = partials[static_cast<std::size_t>(c)];
    pc.channels[static_cast<std::size_t>(c)] = ToTensorStats(p);
    all = Merge(all, p);
  }
  out->stats = ToTensorStats(all);
  if (!r.options.exponent_histogram) {
    out->exponent_histogram.reset();
    return;
  }
  out->exponent_histogram = total;
  out->exponent_histogram->SetSpan();
}

}  // namespace tstat::kernels::cpu
