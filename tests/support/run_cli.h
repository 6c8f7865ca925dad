// Runs the built `nanoinfer` binary (NANOINFER_BINARY_PATH) with arguments and optional
// standard input, capturing exit status, stdout and stderr separately.
#pragma once

#include <string>
#include <vector>

namespace nanoinfer::test {

struct CliResult {
  int status = -1;  // exit code
  std::string out;
  std::string err;
};

CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "");

}  // namespace nanoinfer::test
