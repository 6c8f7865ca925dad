// nanoinfer: the command-line front end. Each subcommand lives in its own cmd_*.cpp and
// registers itself; errors from any of them are caught here, once, and printed as one line.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "command.h"
#include "output.h"

namespace nanoinfer::cli {

static std::vector<CommandSpec>& registry() {
  static std::vector<CommandSpec> commands;
  return commands;
}

bool register_command(CommandSpec spec) {
  registry().push_back(std::move(spec));
  return true;
}

const std::vector<CommandSpec>& registered_commands() { return registry(); }

}  // namespace nanoinfer::cli

int main(int argc, char** argv) {
  using namespace nanoinfer::cli;
  CLI::App app{"nanoinfer " NANOINFER_VERSION
               " - a from-scratch LLM inference engine for the Qwen2 family"};
  app.set_version_flag("--version", NANOINFER_VERSION);
  app.require_subcommand(1);

  auto commands = registered_commands();
  std::sort(commands.begin(), commands.end(),
            [](const CommandSpec& a, const CommandSpec& b) { return a.name < b.name; });

  CLI::App* bench = nullptr;
  for (const auto& spec : commands) {
    if (spec.parent == "bench" && bench == nullptr) {
      bench = app.add_subcommand("bench", "Measure speed; appends JSON lines to bench/results.jsonl");
      bench->require_subcommand(1);
    }
  }
  for (const auto& spec : commands) {
    CLI::App* parent = spec.parent.empty() ? &app : bench;
    CLI::App* sub = parent->add_subcommand(spec.name, spec.description);
    spec.setup(*sub);
  }

  try {
    app.parse(argc, argv);
    // Output written with plain fwrite/fmt::print anywhere in a command fails silently until
    // here: the final flush and stdio's sticky error flag turn it into an error and exit 1.
    flush_out();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "nanoinfer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
