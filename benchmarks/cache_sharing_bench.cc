// See cache_sharing_bench.h.
#include "benchmarks/cache_sharing_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "benchmarks/bench_timing.h"
#include "host/pipeline/background_thread.h"
#include "host/session/cache_eviction.h"

namespace tstat::bench {
namespace {

enum class Mode { kAlone, kReadsOther, kReadsFresh, kReadsEvicts };
constexpr Mode kModes[] = {Mode::kAlone, Mode::kReadsOther, Mode::kReadsFresh, Mode::kReadsEvicts};
constexpr int kBlockRounds = 10;
// Arithmetic after each buffer, in dependent multiply-adds per float written:
// about the benchmark CNN's ratio of compute to output bytes (a 22 ms step
// writing 13 MB of layer outputs).
constexpr std::size_t kFillerPerFloat = 3;

// The modes' names, in Mode's order.
const char* ModeName(Mode m) {
  static constexpr const char* kNames[] = {"alone", "reads_other", "reads_fresh", "reads_evicts"};
  return kNames[static_cast<int>(m)];
}

// A float buffer on its own cache lines, freed by the deleter.
struct Freer {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], Freer>;

// Null when the memory is not there.
Buffer Allocate(std::size_t floats) {
  const std::size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
  Buffer b(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (b == nullptr) return b;
  for (std::size_t i = 0; i < floats; ++i) b[i] = static_cast<float>(i % 97) * 0.01f;
  return b;
}

// Bytes of physical memory (0: unknown).
std::uint64_t PhysicalMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
             : 0;
}

// Keeps results alive so that the loops are not optimised away.
std::atomic<float> g_sink{0.0f};

float Sum(const float* p, std::size_t n) {
  float lanes[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) lanes[j] += p[i + static_cast<std::size_t>(j)];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += p[i];
  for (float l : lanes) s += l;
  return s;
}

class Rig {
 public:
  // `written` and `other`: `chunks` chunks of `floats` each.
  Rig(int chunks, std::size_t floats, Buffer written, Buffer other)
      : chunks_(chunks), floats_(floats), written_(std::move(written)), other_(std::move(other)) {}

  // The writer's round times, `rounds` of them, with the reader in `mode`.
  std::vector<double> Block(Mode mode, int rounds) {
    published_.store(0, std::memory_order_relaxed);
    stop_.store(false, std::memory_order_relaxed);
    std::thread reader;
    if (mode != Mode::kAlone) reader = std::thread([this, mode] { Read(mode); });
    std::vector<double> times;
    for (int r = 0; r < rounds; ++r) {
      const double t0 = NowSeconds();
      Round();
      times.push_back(NowSeconds() - t0);
    }
    stop_.store(true, std::memory_order_release);
    if (reader.joinable()) reader.join();
    return times;
  }

 private:
  float* Chunk(float* base, std::int64_t c) const {
    return base + static_cast<std::size_t>(c % chunks_) * floats_;
  }

  // Each chunk from the one before, then arithmetic on registers (a layer's
  // compute that is not memory traffic), then the chunk is published.
  void Round() {
    float filler = 1.0f;
    for (int c = 0; c < chunks_; ++c) {
      float* out = Chunk(written_.get(), c);
      const float* in = Chunk(written_.get(), c + chunks_ - 1);
      for (int pass = 0; pass < 2; ++pass) {
        for (std::size_t i = 0; i < floats_; ++i) out[i] = in[i] * 0.5f + out[i] * 0.25f + 1.0f;
      }
      for (std::size_t i = 0; i < kFillerPerFloat * floats_; ++i) filler = filler * 0.999f + 0.5f;
      published_.fetch_add(1, std::memory_order_release);
    }
    g_sink.store(filler, std::memory_order_relaxed);
  }

  void Read(Mode mode) {
    std::int64_t seen = 0;
    float s = 0.0f;
    while (!stop_.load(std::memory_order_acquire)) {
      const std::int64_t now = published_.load(std::memory_order_acquire);
      if (now == seen) {
        std::this_thread::yield();
        continue;
      }
      for (; seen < now; ++seen) {
        const float* chunk = Chunk(mode == Mode::kReadsOther ? other_.get() : written_.get(), seen);
        s += Sum(chunk, floats_);
        if (mode == Mode::kReadsEvicts) host::EvictFromCaches(chunk, floats_ * sizeof(float));
      }
    }
    g_sink.store(s, std::memory_order_relaxed);
  }

  const int chunks_;
  const std::size_t floats_;
  Buffer written_;
  Buffer other_;
  std::atomic<std::int64_t> published_{0};
  std::atomic<bool> stop_{false};
};

double Mean(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

}  // namespace

Status RunCacheSharingBench(const CacheSharingOptions& o, std::ostream& out) {
  if (o.rounds < 1 || o.chunks < 2 || !(o.chunk_kib >= 4.0 && o.chunk_kib <= 1024.0 * 1024.0)) {
    return Status::InvalidArgument(
        "bench caches: --rounds must be at least 1, --chunks at least 2, --chunk-kib 4 to "
        "1048576");
  }
  if (host::UsableProcessors() < 2) {
    return Status::FailedPrecondition(
        "bench caches: the process may run on one processor only: no other core to read from");
  }
  const auto floats = static_cast<std::size_t>(o.chunk_kib * 1024.0 / sizeof(float));
  const std::size_t all = floats * static_cast<std::size_t>(o.chunks);
  // Two sets of chunks, every page written: past half the memory the machine
  // would swap or kill the process, not measure.
  const double need_mib = 2.0 * static_cast<double>(all * sizeof(float)) / (1024.0 * 1024.0);
  const std::uint64_t physical = PhysicalMemory();
  char too_much[160];
  std::snprintf(too_much, sizeof(too_much),
                "bench caches: --chunks %d x --chunk-kib %.10g need %.0f MiB (two sets of chunks)",
                o.chunks, o.chunk_kib, need_mib);
  if (physical > 0 && need_mib * 1024.0 * 1024.0 > static_cast<double>(physical) / 2.0) {
    return Status::ResourceExhausted(std::string(too_much) + ", more than half of this machine's " +
                                     std::to_string(physical >> 20) + " MiB");
  }
  Buffer written = Allocate(all);
  Buffer other = written != nullptr ? Allocate(all) : nullptr;
  if (other == nullptr) return Status::ResourceExhausted(std::string(too_much) + ": not allocated");
  Rig rig(o.chunks, floats, std::move(written), std::move(other));
  (void)rig.Block(Mode::kAlone, 2);  // pages faulted in, caches warm
  std::vector<double> times[4];
  for (int done = 0; done < o.rounds; done += kBlockRounds) {
    const int n = std::min(kBlockRounds, o.rounds - done);
    for (Mode m : kModes) {
      std::vector<double> t = rig.Block(m, n);
      times[static_cast<int>(m)].insert(times[static_cast<int>(m)].end(), t.begin(), t.end());
    }
  }
  const double alone_mean = Mean(times[0]);
  const double alone_median = Median(times[0]);
  const bool evicts = host::CanEvictFromCaches();
  if (!o.json) {
    out << "tstat bench caches: a writer's round (" << o.chunks << " chunks of " << o.chunk_kib
        << " KiB written in turn) while another thread reads; " << o.rounds
        << " rounds per mode, alternating in blocks of " << kBlockRounds << "; flushing "
        << (evicts ? "with clflushopt" : "not available here (reads_evicts = reads_fresh)") << "\n";
    out << "mode           mean ms  median ms  mean/alone  median/alone\n";
  }
  for (Mode m : kModes) {
    const std::vector<double>& t = times[static_cast<int>(m)];
    const double mean = Mean(t), median = Median(t);
    char line[256];
    if (o.json) {
      std::snprintf(line, sizeof(line),
                    "{\"case\": \"%s\", \"rounds\": %zu, \"chunks\": %d, \"chunk_kib\": %g, "
                    "\"mean_ms\": %.6g, \"median_ms\": %.6g, \"mean_ratio\": %.6g, "
                    "\"median_ratio\": %.6g, \"evicts\": %s}\n",
                    ModeName(m), t.size(), o.chunks, o.chunk_kib, 1e3 * mean, 1e3 * median,
                    mean / alone_mean, median / alone_median, evicts ? "true" : "false");
    } else {
      std::snprintf(line, sizeof(line), "%-13s %8.3f %10.3f %10.3fx %12.3fx\n", ModeName(m),
                    1e3 * mean, 1e3 * median, mean / alone_mean, median / alone_median);
    }
    out << line;
  }
  return Status::OK();
}

}  // namespace tstat::bench
