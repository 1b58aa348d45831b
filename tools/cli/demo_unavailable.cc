// `tstat demo` in a build without LibTorch: says so and exits 1.
// (bin/tstat of a build with LibTorch lists it too; main() hands the command
// to bin/tstat-torch before parsing, cli/torch_forward.h.)
#include <iostream>

#include "tools/cli/command.h"

namespace tstat::cli {

Command AddDemoCommand(CLI::App& root) {
  CLI::App* app = root.add_subcommand(
      "demo", "Train LibTorch models with injected faults (LibTorch: runs in bin/tstat-torch)");
  app->allow_extras();
  Command c;
  c.app = app;
  c.run = []() {
    std::cerr << "tstat: error: this tstat was built without LibTorch, so `tstat demo` is not "
                 "available; install libtorch-dev (tools/setup.sh) and rebuild\n";
    return kExitFailure;
  };
  return c;
}

}  // namespace tstat::cli
