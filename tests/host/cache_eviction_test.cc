// EvictFromCaches (host/session/cache_eviction.h): it changes no byte, and
// it touches no line outside its range (a range that ends, or begins, at a
// page the process may not touch: a line past either end would fault).
#include "host/session/cache_eviction.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace tstat::host {
namespace {

TEST(CacheEvictionTest, OnX86ItIsThereWhereTheProcessorHasClflushopt) {
#if defined(__x86_64__)
  // /proc/cpuinfo's flags, not CPUID again: an independent reading.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool listed = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    listed = (" " + line + " ").find(" clflushopt ") != std::string::npos;
    break;
  }
  EXPECT_EQ(CanEvictFromCaches(), listed);
#else
  EXPECT_FALSE(CanEvictFromCaches());
#endif
}

TEST(CacheEvictionTest, ChangesNoByte) {
  std::vector<std::uint8_t> bytes(3 * 4096 + 200);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 131 + 7);
  const std::vector<std::uint8_t> before = bytes;
  const std::size_t offsets[] = {0, 1, 63, 64, 65, 4095};
  const std::size_t lengths[] = {0, 1, 63, 64, 65, 4096, 4096 + 3, 2 * 4096 + 100};
  for (std::size_t offset : offsets) {
    for (std::size_t length : lengths) {
      EvictFromCaches(bytes.data() + offset, length);
      ASSERT_EQ(bytes, before) << "offset " << offset << ", length " << length;
    }
  }
  EvictFromCaches(nullptr, 100);  // nothing to evict
}

TEST(CacheEvictionTest, TouchesNoLineOutsideItsRange) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* base = static_cast<std::uint8_t*>(map);
  std::memset(base + page, 0x5a, page);
  // Guard pages on either side: a flushed line there is a fault.
  ASSERT_EQ(::mprotect(base, page, PROT_NONE), 0);
  ASSERT_EQ(::mprotect(base + 2 * page, page, PROT_NONE), 0);
  std::uint8_t* const middle = base + page;
  EvictFromCaches(middle, page);            // the whole page
  EvictFromCaches(middle + page - 1, 1);    // its last byte
  EvictFromCaches(middle + page - 65, 65);  // ending at the next page
  EvictFromCaches(middle, 1);               // beginning at the page before's end
  EvictFromCaches(middle + 1, page - 1);
  for (std::size_t i = 0; i < page; ++i) ASSERT_EQ(middle[i], 0x5a) << i;
  ::munmap(map, 3 * page);
}

}  // namespace
}  // namespace tstat::host
