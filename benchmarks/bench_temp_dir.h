// Where the benchmarks write their runs: a fresh directory under a parent
// (the user's --dir, else $TMPDIR, else /tmp), removed with everything in it.
#pragma once

#include <string>

#include "tstat/status.h"

namespace tstat::bench {

// mkdtemp of "<parent>/<prefix>-XXXXXX".
Result<std::string> MakeTempDir(const std::string& parent, const std::string& prefix);

// Removes `path` and everything under it; errors are ignored.
void RemoveTree(const std::string& path);

// Removes its directory when it goes out of scope.
struct ScopedTempDir {
  std::string path;
  ScopedTempDir() = default;
  explicit ScopedTempDir(std::string p) : path(std::move(p)) {}
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ~ScopedTempDir() {
    if (!path.empty()) RemoveTree(path);
  }
};

}  // namespace tstat::bench
