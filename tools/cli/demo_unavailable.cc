// `tstat demo` in a build without LibTorch: says so and exits 1.
#include <iostream>

#include "tools/cli/command.h"

namespace tstat::cli {

Command AddDemoCommand(CLI::App& root) {
  CLI::App* app = root.add_subcommand(
      "demo", "Train LibTorch models with injected faults (needs a build with LibTorch)");
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
