// Test hooks for the thread pool: its start-up failure path, which the OS only takes under a
// process or memory limit that a test cannot always set (root ignores RLIMIT_NPROC), and a
// worker that wakes late.
// Not part of the public API.
#pragma once

#include <atomic>

namespace nanoinfer::test_hooks {

// When >= 0, a ThreadPool constructor fails to start its worker number `value` (0 = the
// first) as if the OS had refused it (std::system_error, EAGAIN). -1: no failure.
extern std::atomic<int> fail_thread_start_after;

// While true, a worker that has seen a new job waits before claiming any of its chunks, as
// a worker whose core is taken by another process would: the caller must finish the job
// alone, without waiting for it.
extern std::atomic<bool> hold_workers;

}  // namespace nanoinfer::test_hooks
