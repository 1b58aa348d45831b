// ForwardToTorchCli for the tstat binary of a build with LibTorch: the
// LibTorch commands run in TSTAT_TORCH_CLI_NAME, in tstat's own directory.
#include "tools/cli/torch_forward.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli/command.h"

namespace tstat::cli {
namespace {

// The command words of argv, options left out ("bench", "overhead").
std::vector<std::string> Words(int argc, char** argv) {
  std::vector<std::string> words;
  for (int i = 1; i < argc && words.size() < 2; ++i) {
    if (argv[i][0] != '-') words.emplace_back(argv[i]);
  }
  return words;
}

std::string OwnDirectory() {
  std::vector<char> path(4096);
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) return ".";
  std::string self(path.data(), static_cast<std::size_t>(n));
  const std::size_t slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

}  // namespace

bool ForwardToTorchCli(int argc, char** argv, int* exit_code) {
  const std::vector<std::string> w = Words(argc, argv);
  const bool torch =
      (!w.empty() && w[0] == "demo") ||
      (w.size() == 2 && w[0] == "bench" && (w[1] == "overhead" || w[1] == "detection"));
  if (!torch) return false;
  const std::string helper = OwnDirectory() + "/" + TSTAT_TORCH_CLI_NAME;
  std::vector<char*> args(argv, argv + argc);
  std::string arg0 = helper;
  args[0] = arg0.data();
  args.push_back(nullptr);
  ::execv(helper.c_str(), args.data());
  const int err = errno;
  std::cerr << "tstat: error: `tstat " << w[0] << (w.size() > 1 ? " " + w[1] : "") << "` runs in "
            << helper << " (the tstat CLI built with LibTorch), which cannot be "
            << "started: " << std::strerror(err) << "\n";
  *exit_code = kExitFailure;
  return true;
}

}  // namespace tstat::cli
