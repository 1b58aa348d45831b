// MakeTempDir, RemoveTree (bench_temp_dir.h).
#include "benchmarks/bench_temp_dir.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace tstat::bench {

Result<std::string> MakeTempDir(const std::string& parent_or_empty, const std::string& prefix) {
  std::string parent = parent_or_empty;
  if (parent.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    parent = tmp && *tmp ? tmp : "/tmp";
  }
  std::string templ = parent + "/" + prefix + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    return Status::IoError("cannot create a directory under " + parent + ": " +
                           std::strerror(errno));
  }
  return templ;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace tstat::bench
