// Subcommand registry. Each src/cli/cmd_*.cpp registers itself with a static
// `const bool registered = cli::register_command({...});` so that adding a subcommand never
// touches main.cpp. `parent` is "" for top-level commands or "bench" for `nanoinfer bench X`.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace nanoinfer::cli {

struct CommandSpec {
  std::string parent;  // "" or "bench"
  std::string name;
  std::string description;
  // Adds options to `sub` and sets its callback. The callback may throw; main() catches,
  // prints "nanoinfer: error: <message>" on one line and exits 1.
  std::function<void(CLI::App& sub)> setup;
};

bool register_command(CommandSpec spec);
const std::vector<CommandSpec>& registered_commands();

}  // namespace nanoinfer::cli
