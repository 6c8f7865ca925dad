// Writing large files safely: check there is room before the first byte, and leave no
// half-written temporary file behind when the user presses Ctrl-C (or the process is sent
// SIGTERM or SIGHUP). Normal errors are the writer's to clean up (RAII); a signal ends the
// process without unwinding, so the temporary files are registered here and a handler
// removes them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "nanoinfer/interrupt.h"  // InterruptScope, which shares the handlers

namespace nanoinfer {

// Throws nanoinfer::Error unless the file system that holds (or would hold) `path` has at
// least `bytes` available to this user: "{what}: needs {N} bytes but only {M} are free on
// the file system of {dir}". `path` may not exist yet: its nearest existing ancestor is asked.
void require_free_space(const std::filesystem::path& path, uint64_t bytes, std::string_view what);

// While an instance lives, `path` is removed if SIGINT, SIGTERM or SIGHUP arrives (a file is
// unlinked; a directory is removed with everything in it, to a depth of 4); the handler then
// restores the signal's previous action and raises it again, so the process still ends the
// way it would have (exit status 128 + signal). The first instance installs the handlers (a
// signal that was being ignored stays ignored). The registry is a fixed table touched only
// with atomics, and the removal uses only system calls, so the handler is async-signal-safe;
// at most 64 paths of up to 4095 bytes can be registered at once (more throws
// nanoinfer::Error).
class RemoveOnSignal {
 public:
  enum class Kind { File, Directory };
  explicit RemoveOnSignal(const std::filesystem::path& path, Kind kind = Kind::File);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

  // Stops watching (e.g. once the file has been renamed into place).
  void release();

 private:
  int slot_ = -1;
};

}  // namespace nanoinfer
