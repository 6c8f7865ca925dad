#include "support/run_cli.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <thread>

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
  cmd += " <" + shell_quote((io / "stdin").string()) + " >" + shell_quote((io / "stdout").string()) + " 2>" +
         shell_quote((io / "stderr").string());
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(io / "stdout");
  r.err = read_text(io / "stderr");
  return r;
}

CliProcess run_cli_process(const std::vector<std::string>& args, const CliOptions& options) {
  TempDir io;
  write_text(io / "stdin", options.stdin_text);
  const std::string in = options.stdin_path.empty() ? (io / "stdin").string() : options.stdin_path;
  const std::string out = options.stdout_path.empty() ? (io / "stdout").string() : options.stdout_path;
  const std::string err = (io / "stderr").string();
  std::vector<std::string> argv_storage = {NANOINFER_BINARY_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment, built before fork: this process's, with options.env's names replaced.
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(options.env.begin(), options.env.end(), [&](const std::string& o) {
      return std::string_view(o).substr(0, o.find('=')) == name;
    });
    if (!replaced) env_storage.emplace_back(entry);
  }
  env_storage.insert(env_storage.end(), options.env.begin(), options.env.end());
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    // Only async-signal-safe calls between fork and exec.
    const int fd_in = ::open(in.c_str(), O_RDONLY);
    const int fd_out = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int fd_err = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd_in < 0 || fd_out < 0 || fd_err < 0) ::_exit(126);
    ::dup2(fd_in, 0);
    ::dup2(fd_out, 1);
    ::dup2(fd_err, 2);
    // SIGINT and SIGTERM as a terminal would deliver them, whatever the test runner set.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  CliProcess r;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_seconds);
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.exited = !r.timed_out && WIFEXITED(status);
  r.exit_code = r.exited ? WEXITSTATUS(status) : -1;
  r.signal = !r.timed_out && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (options.stdout_path.empty()) r.out = read_text(io / "stdout");
  r.err = read_text(io / "stderr");
  return r;
}

void expect_one_line_error(const CliResult& r, std::string_view needle) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("nanoinfer: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

void expect_error_exactly(const CliResult& r, const std::string& message) {
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "nanoinfer: error: " + message + "\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace nanoinfer::test
