// Runs the built `nanoinfer` binary (NANOINFER_BINARY_PATH) with arguments and optional
// standard input, capturing exit status, stdout and stderr separately.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer::test {

struct CliResult {
  int status = -1;  // exit code
  std::string out;
  std::string err;
};

CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "");

// How run_cli_process runs the binary.
struct CliOptions {
  std::string stdin_text;        // written to a file that becomes stdin ...
  std::string stdin_path;        // ... unless this names a file to use instead (e.g. /dev/zero)
  std::string stdout_path;       // stdout goes here if set (e.g. /dev/full), else it is captured
  int timeout_seconds = 60;      // then the process is killed and reported as hung
  std::vector<std::string> env;  // "NAME=VALUE" set (or replaced) in the child's environment
};

struct CliProcess {
  bool timed_out = false;
  bool exited = false;  // ended by exit(), not by a signal
  int exit_code = -1;
  int signal = 0;   // the signal that ended it, if any
  std::string out;  // captured stdout (empty when stdout_path was given)
  std::string err;
};

// Runs the binary directly (fork + exec, no shell) and reports how it ended, so a crash or a
// hang is seen as such rather than as an exit code.
CliProcess run_cli_process(const std::vector<std::string>& args, const CliOptions& options = {});

// The contract of every command's bad input: exit code 1 and one line on stderr,
// "nanoinfer: error: ..." holding `needle` (stdout is not checked: some commands print before
// they fail).
void expect_one_line_error(const CliResult& r, std::string_view needle);
// The same, with the whole message known: stderr is exactly "nanoinfer: error: MESSAGE\n" and
// stdout is empty.
void expect_error_exactly(const CliResult& r, const std::string& message);

}  // namespace nanoinfer::test
