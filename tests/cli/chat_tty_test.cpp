// `nanoinfer chat` on a terminal (a pseudo-terminal from forkpty): Ctrl-D at the prompt ends the
// chat with the prompt's line ended, so the shell's next prompt starts on a line of its own.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <string>

#include "support/files.h"

namespace nanoinfer {
namespace {

// Appends what the terminal shows to `seen` until `until` appears (empty: until the child
// closes the terminal), at most `seconds`; each 200 ms of silence, writes `poke` if given.
bool read_tty(int fd, std::string& seen, const std::string& until, int seconds, const char* poke = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!until.empty() && seen.find(until) != std::string::npos) return true;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) {
      // A Ctrl-D typed before the line editor takes the terminal over may be flushed with the
      // terminal's pending input: type it again until the chat ends.
      if (poke != nullptr) (void)!::write(fd, poke, 1);
      continue;
    }
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return until.empty();  // EIO: the child closed the terminal
    seen.append(buf, static_cast<size_t>(n));
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
  const bool prompted = read_tty(fd, seen, "> ", 60);
  const bool ended = prompted && ::write(fd, "\x04", 1) == 1 && read_tty(fd, seen, "", 60, "\x04");
  if (!ended) ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(fd);
  ASSERT_TRUE(prompted) << seen;
  ASSERT_TRUE(ended) << "the chat did not end on Ctrl-D:\n" << seen;
  ASSERT_TRUE(WIFEXITED(status)) << seen;
  EXPECT_EQ(WEXITSTATUS(status), 0) << seen;
  // The terminal turns "\n" into "\r\n", and echoes a Ctrl-D as "^D" if it came before the line
  // editor took the terminal over; nothing else follows the prompt.
  std::string after = seen.substr(seen.rfind("> ") + 2);
  while (after.starts_with("^D")) after.erase(0, 2);
  EXPECT_EQ(after, "\r\n") << seen;
}

}  // namespace
}  // namespace nanoinfer
