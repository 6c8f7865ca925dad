#include "base/output_files.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

// ---- the signal-time registry ---------------------------------------------------------------

constexpr int kSlots = 64;
constexpr size_t kMaxPath = 4096;

// A slot is free (0), being filled or emptied by its owner (1), or armed (2): the handler
// unlinks the path of armed slots only, and a slot's path is written only while it is 1.
struct Slot {
  std::atomic<int> state{0};
  char path[kMaxPath];
};
Slot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kSignals)];
std::once_flag g_installed;

extern "C" void remove_registered_files(int sig) {
  const int saved_errno = errno;
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == 2) ::unlink(slot.path);
  }
  // Back to what the signal did before (normally: terminate), then deliver it again once this
  // handler returns, so the exit status still says which signal ended the process.
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    if (kSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  }
  errno = saved_errno;
  ::raise(sig);
}

void install_handlers() {
  struct sigaction action {};
  action.sa_handler = remove_registered_files;
  sigemptyset(&action.sa_mask);
  for (int sig : kSignals) sigaddset(&action.sa_mask, sig);  // one cleanup at a time
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    ::sigaction(kSignals[i], nullptr, &g_previous[i]);
    // An ignored signal (SIGHUP under nohup) stays ignored: it would not end the process.
    if (g_previous[i].sa_handler == SIG_IGN) continue;
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

}  // namespace

void require_free_space(const std::filesystem::path& path, uint64_t bytes, std::string_view what) {
  std::filesystem::path existing = path.empty() ? std::filesystem::path(".") : path;
  std::error_code ec;
  while (!std::filesystem::exists(existing, ec)) {
    existing = existing.has_parent_path() && existing.parent_path() != existing
                   ? existing.parent_path()
                   : std::filesystem::path(".");
  }
  struct statvfs fs {};
  if (::statvfs(existing.c_str(), &fs) != 0)
    fail("{}: cannot check free space on {}: {}", what, existing.string(), std::strerror(errno));
  const uint64_t available =
      static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
  if (bytes > available) {
    fail("{}: needs {} but only {} are free on the file system of {}", what, human_bytes(bytes),
         human_bytes(available), existing.string());
  }
}

RemoveOnSignal::RemoveOnSignal(const std::filesystem::path& path) {
  const std::string& text = path.native();
  if (text.size() >= kMaxPath) fail("{}: path too long to register for removal on a signal", text);
  std::call_once(g_installed, install_handlers);
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      std::memcpy(g_slots[i].path, text.c_str(), text.size() + 1);
      g_slots[i].state.store(2, std::memory_order_release);
      slot_ = i;
      return;
    }
  }
  fail("{}: more than {} temporary files are being written at once", text, kSlots);
}

void RemoveOnSignal::release() {
  if (slot_ < 0) return;
  g_slots[slot_].state.store(0, std::memory_order_release);
  slot_ = -1;
}

RemoveOnSignal::~RemoveOnSignal() {
  release();
}

}  // namespace nanoinfer
