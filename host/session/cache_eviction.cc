// See cache_eviction.h.
#include "host/session/cache_eviction.h"

#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define TSTAT_HAS_CLFLUSHOPT 1
#endif

namespace tstat::host {

#if defined(TSTAT_HAS_CLFLUSHOPT)
namespace {

constexpr std::uintptr_t kCacheLine = 64;

__attribute__((target("clflushopt"))) void FlushLines(std::uintptr_t first, std::uintptr_t last) {
  for (std::uintptr_t line = first; line <= last; line += kCacheLine) {
    _mm_clflushopt(reinterpret_cast<void*>(line));
  }
  _mm_sfence();  // done before the job is handed back
}

// CPUID leaf 7, EBX bit 23 (GCC's and Clang's __builtin_cpu_supports do not
// agree on its name).
bool ProcessorHasClflushopt() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (b & (1u << 23)) != 0;
}

}  // namespace

bool CanEvictFromCaches() {
  static const bool supported = ProcessorHasClflushopt();
  return supported;
}

void EvictFromCaches(const void* data, std::size_t bytes) {
  if (data == nullptr || bytes == 0 || !CanEvictFromCaches()) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  FlushLines(begin & ~(kCacheLine - 1), (begin + bytes - 1) & ~(kCacheLine - 1));
}

#else

bool CanEvictFromCaches() { return false; }
void EvictFromCaches(const void*, std::size_t) {}

#endif

}  // namespace tstat::host
