// `nanoinfer chat` on a terminal (a pseudo-terminal from forkpty): Ctrl-D at the prompt ends the
// chat with the prompt's line ended, so the shell's next prompt starts on a line of its own.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <string>

#include "support/files.h"

namespace nanoinfer {
namespace {

// Appends what the terminal shows to `seen` until `until` appears (empty: until the child
// closes the terminal), at most `seconds`.
bool read_tty(int fd, std::string& seen, const std::string& until, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!until.empty() && seen.find(until) != std::string::npos) return true;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return until.empty();  // EIO: the child closed the terminal
    seen.append(buf, static_cast<size_t>(n));
  }
  return false;
}

// Whether the line editor has the terminal (non-canonical mode, as it sets before reading a
// key): a key typed before that is read by the terminal's own line discipline instead.
bool tty_raw_within(int fd, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    termios t{};
    if (::tcgetattr(fd, &t) == 0 && (t.c_lflag & ICANON) == 0) return true;
    ::usleep(5000);
  }
  return false;
}

TEST(ChatTty, CtrlDEndsThePromptLine) {
  test::TempDir home;
  int fd = -1;
  const pid_t pid = ::forkpty(&fd, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0) << "forkpty failed";
  if (pid == 0) {
    const std::string home_env = "HOME=" + home.path().string();
    char* const argv[] = {const_cast<char*>(NANOINFER_BINARY_PATH), const_cast<char*>("chat"), const_cast<char*>("-n"),
                          const_cast<char*>("4"), nullptr};
    char* const envp[] = {const_cast<char*>(home_env.c_str()), const_cast<char*>("TERM=dumb"), nullptr};
    ::execve(NANOINFER_BINARY_PATH, argv, envp);
    ::_exit(127);
  }
  std::string seen;
  const bool prompted = read_tty(fd, seen, "> ", 60) && tty_raw_within(fd, 60);
  const bool ended = prompted && ::write(fd, "\x04", 1) == 1 && read_tty(fd, seen, "", 60);
  if (!ended) ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(fd);
  ASSERT_TRUE(prompted) << seen;
  ASSERT_TRUE(ended) << "the chat did not end on Ctrl-D:\n" << seen;
  ASSERT_TRUE(WIFEXITED(status)) << seen;
  EXPECT_EQ(WEXITSTATUS(status), 0) << seen;
  // The terminal turns "\n" into "\r\n" and may echo the key as "^D"; nothing else follows the
  // prompt.
  std::string after = seen.substr(seen.rfind("> ") + 2);
  if (after.starts_with("^D")) after.erase(0, 2);
  EXPECT_EQ(after, "\r\n") << seen;
}

}  // namespace
}  // namespace nanoinfer
