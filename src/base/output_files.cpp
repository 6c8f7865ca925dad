#include "base/output_files.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
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
// removes the path of armed slots only, and a slot's path is written only while it is 1.
struct Slot {
  std::atomic<int> state{0};
  bool directory = false;
  char path[kMaxPath];
};
Slot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kSignals)];
std::once_flag g_installed;
std::atomic<int> g_scopes{0};       // live InterruptScopes
std::atomic<int> g_interrupted{0};  // the signal a scope recorded
static_assert(std::atomic<int>::is_always_lock_free);

// Removes everything in the open directory `dir`, subdirectories to `depth` more levels, with
// system calls only (getdents64, unlinkat, openat): no allocation, safe in a signal handler.
constexpr int kMaxRemoveDepth = 4;
struct LinuxDirent64 {  // what getdents64 fills in (glibc does not declare it)
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};
alignas(8) char g_dirents[kMaxRemoveDepth + 1][4096];

void empty_directory(int dir, int depth) {
  for (int pass = 0; pass < 64; ++pass) {  // entries removed while reading may shift the listing
    bool removed = false;
    ::lseek(dir, 0, SEEK_SET);
    for (;;) {
      char* buf = g_dirents[depth];
      const long n = ::syscall(SYS_getdents64, dir, buf, sizeof g_dirents[depth]);
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        const auto* e = reinterpret_cast<const LinuxDirent64*>(buf + at);
        at += e->d_reclen;
        const char* name = e->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        if (::unlinkat(dir, name, 0) == 0) {
          removed = true;
          continue;
        }
        if (depth >= kMaxRemoveDepth) continue;
        const int sub = ::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) continue;
        empty_directory(sub, depth + 1);
        ::close(sub);
        if (::unlinkat(dir, name, AT_REMOVEDIR) == 0) removed = true;
      }
    }
    if (!removed) return;
  }
}

void remove_path(const Slot& slot) {
  if (!slot.directory) {
    ::unlink(slot.path);
    return;
  }
  const int dir = ::open(slot.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;
  empty_directory(dir, 0);
  ::close(dir);
  ::rmdir(slot.path);
}

extern "C" void remove_registered_files(int sig) {
  const int saved_errno = errno;
  // Inside an InterruptScope the first signal only asks the command to stop.
  int none = 0;
  if (g_scopes.load(std::memory_order_acquire) > 0 &&
      g_interrupted.compare_exchange_strong(none, sig, std::memory_order_acq_rel)) {
    errno = saved_errno;
    return;
  }
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == 2) remove_path(slot);
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
    existing = existing.has_parent_path() && existing.parent_path() != existing ? existing.parent_path()
                                                                                : std::filesystem::path(".");
  }
  struct statvfs fs {};
  if (::statvfs(existing.c_str(), &fs) != 0)
    fail("{}: cannot check free space on {}: {}", what, existing.string(), std::strerror(errno));
  const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
  if (bytes > available) {
    fail("{}: needs {} but only {} are free on the file system of {}", what, human_bytes(bytes), human_bytes(available),
         existing.string());
  }
}

RemoveOnSignal::RemoveOnSignal(const std::filesystem::path& path, Kind kind) {
  const std::string& text = path.native();
  if (text.size() >= kMaxPath) fail("{}: path too long to register for removal on a signal", text);
  std::call_once(g_installed, install_handlers);
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      std::memcpy(g_slots[i].path, text.c_str(), text.size() + 1);
      g_slots[i].directory = kind == Kind::Directory;
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

InterruptScope::InterruptScope() {
  std::call_once(g_installed, install_handlers);
  if (g_scopes.fetch_add(1, std::memory_order_acq_rel) == 0) g_interrupted.store(0, std::memory_order_release);
}

InterruptScope::~InterruptScope() {
  g_scopes.fetch_sub(1, std::memory_order_acq_rel);
}

int InterruptScope::interrupted() {
  return g_interrupted.load(std::memory_order_acquire);
}

}  // namespace nanoinfer
