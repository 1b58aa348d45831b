// `tstat bench overhead` in a CLI built without LibTorch: the subcommand
// exists (so `tstat bench --help` lists it) and says why it cannot run.
// (bin/tstat of a build with LibTorch lists it too; main() hands the command
// to bin/tstat-torch before parsing, cli/torch_forward.h.)
#include <iostream>

#include "tools/cli/bench_overhead.h"
#include "tools/cli/command.h"

namespace tstat::cli {

CLI::App* AddBenchOverheadCommand(CLI::App* bench, std::function<int()>* run) {
  CLI::App* app = bench->add_subcommand(
      "overhead", "Slowdown of LibTorch training under capture (LibTorch: runs in bin/tstat-torch)");
  app->allow_extras();  // any flags: the answer is the same
  *run = []() {
    return ReportError(Status::NotSupported(
        "this tstat was built without LibTorch: install libtorch-dev (tools/setup.sh) and "
        "reconfigure with -DTSTAT_WITH_TORCH=AUTO or ON"));
  };
  return app;
}

}  // namespace tstat::cli
