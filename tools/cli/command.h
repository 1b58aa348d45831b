// Subcommands of the `tstat` CLI and the conventions they share.
//
// Adding a subcommand `foo`: write tools/cli/foo_command.cc defining
//   Command AddFooCommand(CLI::App& root);
// add one line `X(Foo)` to TSTAT_CLI_COMMANDS below, and list the file in
// tools/CMakeLists.txt. AddFooCommand registers its CLI11 subcommand and flags
// on `root` and returns the function main() calls when the user picked it.
//
// Exit codes: 0 success, 1 the command failed (a non-OK Status, printed by
// ReportError), 2 a usage error (unknown subcommand or flag, bad value).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "tstat/status.h"

namespace tstat::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct Command {
  CLI::App* app = nullptr;   // the registered subcommand
  std::function<int()> run;  // runs it after parsing; returns the exit code
};

// Every subcommand, in the order `tstat --help` lists them. One line each.
// clang-format off
#define TSTAT_CLI_COMMANDS(X) \
  X(Inspect) \
  X(Dump) \
  X(Bench) \
  X(Rules) \
  X(Check) \
  X(Export) \
  X(Report) \
  X(Serve) \
  X(Demo)
// clang-format on

#define TSTAT_CLI_DECLARE_COMMAND(Name) Command Add##Name##Command(CLI::App& root);
TSTAT_CLI_COMMANDS(TSTAT_CLI_DECLARE_COMMAND)
#undef TSTAT_CLI_DECLARE_COMMAND

// Prints "tstat: error: <status>" to stderr and returns kExitFailure
// (kExitOk for an OK status).
int ReportError(const Status& status);

// Names accepted by a choice flag, for messages: "f32, f16, bf16".
std::string JoinNames(const std::vector<std::string>& names);

}  // namespace tstat::cli
