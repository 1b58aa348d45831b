// The main() of a fuzz target in an ordinary build: runs every file named on
// the command line (directories: every regular file in them, sorted) through
// LLVMFuzzerTestOneInput once. ctest runs each target over its corpus
// (tests/fuzz/corpus/<target>/: the seeds and every input that ever crashed
// it), so the Release and sanitizer stages replay them without libFuzzer.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "io/h5/posix_file.h"
#include "tests/fuzz/fuzz_target.h"

namespace fs = std::filesystem;

namespace {

// Larger than any corpus file; a bound, as for every read.
constexpr std::uint64_t kMaxInputBytes = 64ull << 20;

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const fs::directory_entry& e : fs::directory_iterator(arg, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else if (fs::is_regular_file(arg, ec)) {
      inputs.push_back(arg);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR... (no inputs found)\n", argv[0]);
    return 2;
  }
  for (const fs::path& path : inputs) {
    tstat::Result<std::string> bytes = tstat::io::ReadRegularFile(path.string(), kMaxInputBytes);
    if (!bytes.ok()) {
      std::fprintf(stderr, "%s\n", bytes.status().ToString().c_str());
      return 2;
    }
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), bytes->size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size());
  }
  std::printf("%zu inputs replayed without a crash\n", inputs.size());
  return 0;
}
