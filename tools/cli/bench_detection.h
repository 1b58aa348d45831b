// `tstat bench detection`, registered by bench_command.cc. Defined in
// bench_detection_command.cc when the CLI is built with LibTorch, else in
// bench_detection_unavailable.cc (which says so and exits 1).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tstat::cli {

// Adds the `detection` subcommand to `bench`; *run runs it once parsed.
CLI::App* AddBenchDetectionCommand(CLI::App* bench, std::function<int()>* run);

}  // namespace tstat::cli
