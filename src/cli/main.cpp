// nanoinfer: the command-line front end. Each subcommand lives in its own cmd_*.cpp and
// registers itself; errors from any of them are caught here, once, and printed as one line:
// "nanoinfer: error: <message>" on stderr and exit code 1, for CLI11's parse errors too.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "command.h"
#include "output.h"
#include "version.h"

namespace nanoinfer::cli {

static std::vector<CommandSpec>& registry() {
  static std::vector<CommandSpec> commands;
  return commands;
}

bool register_command(CommandSpec spec) {
  registry().push_back(std::move(spec));
  return true;
}

const std::vector<CommandSpec>& registered_commands() {
  return registry();
}

}  // namespace nanoinfer::cli

namespace {

using nanoinfer::cli::CommandSpec;

// CLI11 2.1 converts integers leniently: "-1" for an unsigned option becomes 2^64 - 1 and an
// int64 out of range saturates (so "-n 99999999999999999999" ran). Every integer option of
// every command gets this check, by the type CLI11 recorded for it; it runs on the text
// before conversion. Non-decimal text is left to CLI11, which rejects it.
CLI::Validator integer_range(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& text) -> std::string {
        const char* p = text.c_str();
        while (*p == ' ') ++p;
        if (is_unsigned && *p == '-') return "must be a non-negative integer, got " + text;
        errno = 0;
        char* end = nullptr;
        if (is_unsigned) {
          (void)std::strtoull(p, &end, 0);
        } else {
          (void)std::strtoll(p, &end, 0);
        }
        if (end != p && *end == '\0' && errno == ERANGE) {
          return fmt::format("{} is out of range (at most {})", text,
                             is_unsigned ? std::to_string(UINT64_MAX) : std::to_string(INT64_MAX));
        }
        return "";
      },
      "", "integer range");
}

void check_integer_options(CLI::App& app) {
  for (CLI::Option* option : app.get_options([](CLI::Option*) { return true; })) {
    const std::string type = option->get_type_name();
    if (type == "INT" || type == "UINT") option->check(integer_range(type == "UINT"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_integer_options(*sub);
}

// "generate" or "bench tokenize": the deepest command the parse reached.
std::string command_path(CLI::App& app) {
  std::string path;
  for (CLI::App* a = &app; !a->get_subcommands().empty();) {
    a = a->get_subcommands().front();
    path += (path.empty() ? "" : " ") + a->get_name();
  }
  return path;
}

std::string command_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

// One line "nanoinfer: error: ..." for a CLI11 parse error, which CLI11 itself prints as two
// lines without the prefix (and, for an unknown command, as "A subcommand is required").
std::string parse_error_line(CLI::App& app, const CLI::ParseError& e) {
  const std::string path = command_path(app);
  CLI::App* innermost = &app;
  while (!innermost->get_subcommands().empty()) innermost = innermost->get_subcommands().front();
  const std::string prefix = path.empty() ? "" : path + ": ";
  const std::vector<std::string> rest = innermost->remaining();
  std::string message = e.what();
  if (message == "A subcommand is required") {
    if (!rest.empty() && !rest.front().starts_with('-'))
      return fmt::format("{}unknown command '{}' (commands: {})", prefix, rest.front(), command_names(*innermost));
    if (rest.empty()) return fmt::format("{}a command is required (commands: {})", prefix, command_names(*innermost));
  }
  // CLI11 checks required options before unexpected ones, so "generate --bogus" would be
  // reported as a missing --prompt; the unknown argument is the more useful news.
  if (!rest.empty()) message = fmt::format("unexpected argument '{}'", rest.front());
  std::replace(message.begin(), message.end(), '\n', ' ');
  return fmt::format("{}{} (see nanoinfer {}--help)", prefix, message, path.empty() ? "" : path + " ");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nanoinfer::cli;
  CLI::App app{"nanoinfer " NANOINFER_VERSION " - a from-scratch LLM inference engine for the Qwen2 family"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.footer(
      "Errors are one line on stderr, \"nanoinfer: error: ...\", with exit code 1.\n"
      "Environment: NANOINFER_THREADS sets the default of every -t (a -t given wins); "
      "NANOINFER_CPU_DISABLE hides CPU features from detection (see --isa).");

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
  check_integer_options(app);

  try {
    app.parse(argc, argv);
    // Output written with plain fwrite/fmt::print anywhere in a command fails silently until
    // here: the final flush and stdio's sticky error flag turn it into an error and exit 1.
    flush_out();
  } catch (const CLI::Success& e) {
    const int code = app.exit(e);  // --help, --version: printed to stdout
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "nanoinfer: error: cannot write to standard output: %s\n", std::strerror(errno));
      return 1;
    }
    return code;
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // the command reported its errors already (chat turns)
  } catch (const CLI::ParseError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "nanoinfer: error: %s\n", parse_error_line(app, e).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "nanoinfer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
