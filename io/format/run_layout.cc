// See run_layout.h.
#include "io/format/run_layout.h"

#include <cstdio>

namespace tstat::io {
namespace {

// Parses the all-digit string s[begin, end) (at least `min_digits`, at most 18).
bool ParseDigits(const std::string& s, std::size_t begin, std::size_t end, std::size_t min_digits,
                 std::int64_t* out) {
  if (end < begin || end - begin < min_digits || end - begin > 18) return false;
  std::int64_t v = 0;
  for (std::size_t i = begin; i < end; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

bool StartsWith(const std::string& s, const char* prefix, std::size_t n) {
  return s.size() >= n && s.compare(0, n, prefix) == 0;
}

}  // namespace

std::string WorkerDirName(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "worker-%05d", rank);
  return name;
}

std::string SegmentFileName(std::int64_t index) {
  char name[40];
  std::snprintf(name, sizeof(name), "seg-%012lld.h5", static_cast<long long>(index));
  return name;
}

bool ParseWorkerDirName(const std::string& name, int* rank) {
  std::int64_t v = 0;
  if (!StartsWith(name, "worker-", 7) || !ParseDigits(name, 7, name.size(), 5, &v) ||
      v > 0x7fffffff) {
    return false;
  }
  *rank = static_cast<int>(v);
  return true;
}

bool ParseSegmentFileName(const std::string& name, std::int64_t* index) {
  if (!StartsWith(name, "seg-", 4) || name.size() < 7 ||
      name.compare(name.size() - 3, 3, ".h5") != 0) {
    return false;
  }
  return ParseDigits(name, 4, name.size() - 3, 1, index);
}

}  // namespace tstat::io
