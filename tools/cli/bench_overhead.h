// `tstat bench overhead`, registered by bench_command.cc. Defined in
// bench_overhead_command.cc when the CLI is built with LibTorch, else in
// bench_overhead_unavailable.cc (which says so and exits 1).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tstat::cli {

// Adds the `overhead` subcommand to `bench`; *run runs it once parsed.
CLI::App* AddBenchOverheadCommand(CLI::App* bench, std::function<int()>* run);

}  // namespace tstat::cli
