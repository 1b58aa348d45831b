// `tstat`: the command-line front end. main() registers every subcommand of
// TSTAT_CLI_COMMANDS (command.h), parses, and runs the one chosen; it is the
// only place that turns errors into messages and exit codes.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli/command.h"
#include "tools/cli/torch_forward.h"
#include "tstat/engine.h"

namespace tstat::cli {
namespace {

// The deepest subcommand the parser entered (the root when none).
const CLI::App* DeepestParsed(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    if (sub->parsed()) return DeepestParsed(*sub);
  }
  return &app;
}

// "tstat bench stats".
std::string CommandPath(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* p = app->get_parent(); p != nullptr; p = p->get_parent()) {
    path = p->get_name() + " " + path;
  }
  return path;
}

std::vector<std::string> SubcommandNames(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

int UsageError(const CLI::App& root, const CLI::ParseError& e) {
  const CLI::App* at = DeepestParsed(root);
  const std::string path = CommandPath(at);
  const std::vector<std::string> extras = at->remaining();
  const std::vector<std::string> subs = SubcommandNames(at);
  const bool extras_error = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  const bool required_error = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
  std::string message;
  if ((extras_error || required_error) && !subs.empty() && !extras.empty() && !extras[0].empty() &&
      extras[0][0] != '-') {
    message = "unknown subcommand '" + extras[0] + "' for '" + path +
              "' (valid: " + JoinNames(subs) + ")";
  } else if (extras_error) {
    std::string list;
    for (const std::string& x : extras) list += (list.empty() ? "" : " ") + x;
    message = "unrecognized argument" + std::string(extras.size() > 1 ? "s" : "") + " for '" +
              path + "': " + (list.empty() ? e.what() : list);
  } else if (required_error && !subs.empty()) {
    message = "'" + path + "' needs a subcommand (valid: " + JoinNames(subs) + ")";
  } else {
    message = e.what();
  }
  std::cerr << "tstat: error: " << message << "\n"
            << "Run '" << path << " --help' for usage.\n";
  return kExitUsage;
}

void PrintVersion() {
  std::cout << "tstat " << Version() << "\n"
            << "backends: cpu" << (BuiltWithCuda() ? ", cuda" : " (built without CUDA)") << "\n"
            << "cuda devices: " << CudaDeviceCount() << "\n";
}

int Main(int argc, char** argv) {
  CLI::App app("tstat: statistics of tensors (device-side training debugger)", "tstat");
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version, the backends built and the CUDA devices");

  std::vector<Command> commands;
#define TSTAT_CLI_ADD_COMMAND(Name) commands.push_back(Add##Name##Command(app));
  TSTAT_CLI_COMMANDS(TSTAT_CLI_ADD_COMMAND)
#undef TSTAT_CLI_ADD_COMMAND

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e);  // --help
    }
    return UsageError(app, e);
  }
  if (version) {
    PrintVersion();
    return kExitOk;
  }
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  std::cerr << app.help()
            << "\ntstat: error: no subcommand given (valid: " << JoinNames(SubcommandNames(&app))
            << ")\n";
  return kExitUsage;
}

}  // namespace

int ReportError(const Status& status) {
  if (status.ok()) return kExitOk;
  std::cerr << "tstat: error: " << status.ToString() << "\n";
  return kExitFailure;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace tstat::cli

int main(int argc, char** argv) {
  int code = 0;
  if (tstat::cli::ForwardToTorchCli(argc, argv, &code)) return code;
  return tstat::cli::Main(argc, argv);
}
