#include "support/run_cli.h"

#include <sys/wait.h>

#include <cstdlib>

#include "support/files.h"

namespace nanoinfer::test {

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text) {
  TempDir io;
  write_text(io / "stdin", stdin_text);
  std::string cmd = shell_quote(NANOINFER_BINARY_PATH);
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " <" + shell_quote((io / "stdin").string()) + " >" + shell_quote((io / "stdout").string()) +
         " 2>" + shell_quote((io / "stderr").string());
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(io / "stdout");
  r.err = read_text(io / "stderr");
  return r;
}

}  // namespace nanoinfer::test
