// A test hook for the thread pool's start-up failure path, which the OS only takes under a
// process or memory limit that a test cannot always set (root ignores RLIMIT_NPROC).
// Not part of the public API.
#pragma once

#include <atomic>

namespace nanoinfer::test_hooks {

// When >= 0, a ThreadPool constructor fails to start its worker number `value` (0 = the
// first) as if the OS had refused it (std::system_error, EAGAIN). -1: no failure.
extern std::atomic<int> fail_thread_start_after;

}  // namespace nanoinfer::test_hooks
