// XOR-reduce read loop. memcpy loads keep it free of aliasing questions (the
// buffer holds floats); GCC turns them into plain vector loads.
#include "benchmarks/read_bandwidth.h"

#include <omp.h>

#include <cstring>

#include "tstat/engine.h"

namespace tstat::bench {
namespace {

volatile std::uint64_t g_sink = 0;

}  // namespace

int ResolveThreads(int threads) { return threads > 0 ? threads : DefaultCpuThreads(); }

std::uint64_t XorReduce(const void* data, std::size_t bytes, int threads) {
  const auto* p = static_cast<const unsigned char*>(data);
  const std::int64_t words = static_cast<std::int64_t>(bytes / 8);
  std::uint64_t acc = 0;
#pragma omp parallel for num_threads(ResolveThreads(threads)) schedule(static) reduction(^ : acc)
  for (std::int64_t i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + i * 8, sizeof w);
    acc ^= w;
  }
  for (std::size_t i = static_cast<std::size_t>(words) * 8; i < bytes; ++i) acc ^= p[i];
  g_sink = g_sink ^ acc;
  return acc;
}

}  // namespace tstat::bench
