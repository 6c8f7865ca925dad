#include "nanoinfer/thread_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "base/thread_pool_testing.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

struct Range {
  size_t begin, end;
  std::thread::id thread;
};

// Runs one parallel_for and records every call; indices are counted with atomics so that an
// overlap would show up as a count of 2 rather than as a data race.
std::vector<Range> record(ThreadPool& pool, size_t n, size_t grain, std::vector<std::atomic<int>>& hits) {
  std::mutex mutex;
  std::vector<Range> ranges;
  pool.parallel_for(n, grain, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex);
    ranges.push_back({begin, end, std::this_thread::get_id()});
  });
  return ranges;
}

TEST(ThreadPool, CoversEveryIndexExactlyOnceInGrainAlignedChunks) {
  const size_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 15, 16, 17, 63, 64, 65, 100, 896, 1000, 4864};
  const size_t grains[] = {0, 1, 2, 3, 4, 7, 16, 64, 100, 5000};
  int combos = 0;
  for (int threads = 1; threads <= 5; ++threads) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (size_t n : sizes) {
      for (size_t grain : grains) {
        std::vector<std::atomic<int>> hits(n);
        const uint64_t joins = pool.joins();
        const std::vector<Range> ranges = record(pool, n, grain, hits);
        const size_t g = grain == 0 ? 1 : grain;  // grain 0 is treated as 1
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " grain=" << grain << " i=" << i;
        const size_t chunk = ThreadPool::chunk_size(n, grain, threads);
        ASSERT_EQ(chunk % g, 0u);
        ASSERT_GE(chunk, g);
        const bool split = threads > 1 && n > chunk;
        if (!split) {
          // Run whole on the caller: one call, or none for n = 0.
          ASSERT_EQ(ranges.size(), n == 0 ? 0u : 1u);
          if (n > 0) {
            EXPECT_EQ(ranges[0].begin, 0u);
            EXPECT_EQ(ranges[0].end, n);
            EXPECT_EQ(ranges[0].thread, std::this_thread::get_id());
          }
          ASSERT_EQ(pool.joins(), joins);
        } else {
          // One call per chunk: [i * chunk, min(n, (i + 1) * chunk)), grain-aligned.
          ASSERT_EQ(ranges.size(), (n + chunk - 1) / chunk);
          std::set<size_t> begins;
          for (const Range& r : ranges) {
            ASSERT_EQ(r.begin % chunk, 0u);
            ASSERT_EQ(r.end, std::min(n, r.begin + chunk));
            ASSERT_EQ(r.begin % g, 0u);
            begins.insert(r.begin);
          }
          ASSERT_EQ(begins.size(), ranges.size());
          ASSERT_EQ(pool.joins(), joins + 1);
        }
        ++combos;
      }
    }
  }
  EXPECT_EQ(combos, 5 * 17 * 10);
}

TEST(ThreadPool, ChunksAreAboutFourPerThreadInWholeGrains) {
  static_assert(ThreadPool::kChunksPerThread == 4);
  // Qwen2.5-0.5B's q rows at grain 16, 2 threads: 56 grains over 8 chunks = 7 grains each.
  EXPECT_EQ(ThreadPool::chunk_size(896, 16, 2), 112u);
  // Its logits rows: 9,496 grains over 8 chunks, rounded up to 1,187 grains.
  EXPECT_EQ(ThreadPool::chunk_size(151936, 16, 2), 1187u * 16);
  // Fewer grains than wanted chunks: one grain per chunk (the last one partial).
  EXPECT_EQ(ThreadPool::chunk_size(40, 4, 4), 4u);
  EXPECT_EQ(ThreadPool::chunk_size(10, 3, 2), 3u);
  // 14 attention heads at grain 1 on 2 threads: 2 heads per chunk, 7 chunks.
  EXPECT_EQ(ThreadPool::chunk_size(14, 1, 2), 2u);
  // One thread, grain 0 (taken as 1), and a single grain.
  EXPECT_EQ(ThreadPool::chunk_size(100, 1, 1), 25u);
  EXPECT_EQ(ThreadPool::chunk_size(100, 0, 1), 25u);
  EXPECT_EQ(ThreadPool::chunk_size(5, 64, 3), 64u);
}

// A tuned product's chunks per thread (nanoinfer/tuning.h), 0 meaning the default.
TEST(ThreadPool, ChunksPerThreadCutsFinerOrCoarser) {
  EXPECT_EQ(ThreadPool::chunk_size(896, 16, 2, 0), 112u);
  EXPECT_EQ(ThreadPool::chunk_size(896, 16, 2, 4), 112u);
  EXPECT_EQ(ThreadPool::chunk_size(896, 16, 2, 1), 448u);  // 56 grains over 2 chunks
  EXPECT_EQ(ThreadPool::chunk_size(896, 16, 2, 8), 64u);   // over 16 chunks: 3.5 -> 4 grains
  EXPECT_EQ(ThreadPool::chunk_size(896, 16, 2, 64), 16u);  // more chunks wanted than grains: one each
  // The pool cuts its calls accordingly, and counts the chunks.
  ThreadPool pool(2);
  std::atomic<size_t> calls{0};
  const auto count = [&](size_t, size_t) { calls.fetch_add(1); };
  pool.parallel_for(896, 16, count, 1);
  EXPECT_EQ(calls.load(), 2u);
  EXPECT_EQ(pool.chunks(), 2u);
  pool.parallel_for(896, 16, count, 8);
  EXPECT_EQ(calls.load(), 2u + 14u);  // ceil(896 / 64)
  EXPECT_EQ(pool.chunks(), 16u);
  EXPECT_EQ(pool.joins(), 2u);
}

TEST(ThreadPool, JoinsCountCallsCutIntoChunksOnly) {
  ThreadPool pool(2);
  EXPECT_EQ(pool.joins(), 0u);
  const auto nothing = [](size_t, size_t) {};
  pool.parallel_for(0, 1, nothing);    // empty
  pool.parallel_for(8, 8, nothing);    // one grain: one chunk
  pool.parallel_for(100, 0, nothing);  // 100 grains: 8 chunks
  EXPECT_EQ(pool.joins(), 1u);
  pool.parallel_for(2, 1, [&](size_t, size_t) {
    pool.parallel_for(100, 1, nothing);  // nested: runs whole, counts nothing
  });
  EXPECT_EQ(pool.joins(), 2u);
  for (int i = 0; i < 10; ++i) pool.parallel_for(64, 4, nothing);
  EXPECT_EQ(pool.joins(), 12u);

  ThreadPool single(1);
  single.parallel_for(1000, 1, nothing);
  EXPECT_EQ(single.joins(), 0u);
}

// A worker whose core is busy elsewhere must not hold the caller up: with the workers held
// back before they claim anything, the caller runs every chunk itself and returns. (The
// pool that split work statically waited here for the held worker, forever.)
TEST(ThreadPool, CallerDoesNotWaitForALateWorker) {
  ThreadPool pool(3);
  test_hooks::hold_workers = true;
  for (int call = 0; call < 50; ++call) {
    std::vector<std::atomic<int>> hits(1000);
    const std::vector<Range> ranges = record(pool, 1000, 8, hits);
    const size_t chunk = ThreadPool::chunk_size(1000, 8, 3);
    ASSERT_EQ(ranges.size(), (1000 + chunk - 1) / chunk);
    for (const Range& r : ranges) ASSERT_EQ(r.thread, std::this_thread::get_id());
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  // Missing that many jobs sends the pool into its contention mode (calls run on the caller
  // alone for a while); calls nested in a chunk must still run whole, not wait for the pool.
  std::atomic<size_t> nested{0};
  for (int call = 0; call < 50; ++call) {
    pool.parallel_for(
        64, 1, [&](size_t, size_t) { pool.parallel_for(10, 1, [&](size_t b, size_t e) { nested.fetch_add(e - b); }); });
  }
  const size_t outer_chunks = (64 + ThreadPool::chunk_size(64, 1, 3) - 1) / ThreadPool::chunk_size(64, 1, 3);
  EXPECT_EQ(outer_chunks, 11u);  // chunks of 6 grains: 64 grains wanted in 12
  EXPECT_EQ(nested.load(), 50u * outer_chunks * 10);
  test_hooks::hold_workers = false;
  EXPECT_EQ(pool.joins(), 100u);
  // Released, the workers find nothing stale to run; the next calls are exact.
  std::atomic<size_t> total{0};
  for (int call = 0; call < 100; ++call)
    pool.parallel_for(1000, 8, [&](size_t b, size_t e) { total.fetch_add(e - b); });
  EXPECT_EQ(total.load(), 100u * 1000);
}

TEST(ThreadPool, ManyCallsInARowKeepCountsExact) {
  ThreadPool pool(3);
  std::atomic<size_t> total{0};
  constexpr int kCalls = 2000;
  for (int call = 0; call < kCalls; ++call) {
    pool.parallel_for(96, 8,
                      [&](size_t begin, size_t end) { total.fetch_add(end - begin, std::memory_order_relaxed); });
  }
  EXPECT_EQ(total.load(), size_t{96} * kCalls);
  EXPECT_EQ(pool.joins(), static_cast<uint64_t>(kCalls));
}

TEST(ThreadPool, WakesWorkersThatHaveGoneToSleep) {
  for (int round = 0; round < 3; ++round) {
    // A fresh pool's worker sleeps at once (no job yet); the wait is longer than any spin.
    ThreadPool pool(2);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // The caller's chunks wait until another thread has run a chunk: only a woken worker
    // can, so the call returns only if the wake-up works.
    std::atomic<bool> worker_ran{false};
    std::atomic<int> chunks{0};
    const std::thread::id caller = std::this_thread::get_id();
    pool.parallel_for(64, 1, [&](size_t, size_t) {
      if (std::this_thread::get_id() != caller) {
        worker_ran = true;
      } else {
        while (!worker_ran) std::this_thread::yield();
      }
      chunks.fetch_add(1);
    });
    EXPECT_EQ(chunks.load(), 8);
    EXPECT_TRUE(worker_ran.load());
  }
}

TEST(ThreadPool, RethrowsTheExceptionAfterAllChunksFinishAndStaysUsable) {
  ThreadPool pool(3);
  ASSERT_EQ(ThreadPool::chunk_size(30, 1, 3), 3u);  // 10 chunks
  std::atomic<int> finished{0};
  try {
    pool.parallel_for(30, 1, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        if (i == 10) throw std::runtime_error("index 10 failed");
        finished.fetch_add(1);
      }
    });
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 10 failed");
  }
  // Every other chunk ran to completion; the failing chunk [9, 12) stopped at 10.
  EXPECT_EQ(finished.load(), 28);

  std::atomic<size_t> total{0};
  pool.parallel_for(30, 1, [&](size_t begin, size_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 30u);
}

TEST(ThreadPool, NestedCallRunsWholeOnTheCallingThread) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(8 * 50);
  std::atomic<int> inner_calls{0};
  pool.parallel_for(8, 1, [&](size_t outer, size_t) {
    const std::thread::id self = std::this_thread::get_id();
    pool.parallel_for(50, 5, [&](size_t begin, size_t end) {
      EXPECT_EQ(begin, 0u);
      EXPECT_EQ(end, 50u);
      EXPECT_EQ(std::this_thread::get_id(), self);
      inner_calls.fetch_add(1);
      for (size_t i = begin; i < end; ++i) hits[outer * 50 + i].fetch_add(1);
    });
  });
  EXPECT_EQ(inner_calls.load(), 8);
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, CallersOnSeveralThreadsAreSerialised) {
  ThreadPool pool(2);
  std::atomic<size_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int i = 0; i < 500; ++i) pool.parallel_for(40, 4, [&](size_t b, size_t e) { total += e - b; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), size_t{3 * 500 * 40});
}

TEST(ThreadPool, AcceptsStdFunctionAndRejectsNegativeCounts) {
  ThreadPool pool(2);
  std::atomic<size_t> total{0};
  const std::function<void(size_t, size_t)> fn = [&](size_t b, size_t e) { total += e - b; };
  pool.parallel_for(17, 2, fn);
  EXPECT_EQ(total.load(), 17u);
  EXPECT_THROW(ThreadPool(-1), Error);
}

TEST(ThreadPool, DefaultSizeIsThePhysicalCoreCount) {
  const int cores = ThreadPool::physical_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  ThreadPool pool;
  EXPECT_EQ(pool.size(), cores);
}

TEST(ThreadPool, ThreadStartFailureStopsTheStartedWorkersAndThrowsOneLine) {
  for (const int fail_at : {0, 3}) {
    test_hooks::fail_thread_start_after = fail_at;
    std::string message;
    try {
      ThreadPool pool(8);
    } catch (const Error& e) {
      message = e.what();
    }
    test_hooks::fail_thread_start_after = -1;
    EXPECT_EQ(message, fmt::format("thread pool: the system refused to start thread {} of 8 ({}); "
                                   "the {} worker(s) started were stopped. Use fewer threads (-t) "
                                   "or raise the process limit (ulimit -u)",
                                   fail_at + 2,
                                   std::make_error_code(std::errc::resource_unavailable_try_again).message(), fail_at));
  }
  // Nothing is left behind: a new pool starts and works.
  ThreadPool pool(8);
  std::atomic<size_t> total{0};
  pool.parallel_for(64, 1, [&](size_t b, size_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 64u);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NANOINFER_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NANOINFER_SANITIZED 1
#endif
#endif

// The real failure: in a child process whose address space is capped so the OS refuses
// thread stacks (EAGAIN), the pool must throw and the child exit, not hang or abort.
TEST(ThreadPool, RefusedByTheOsInAChildProcessFailsCleanly) {
#ifdef NANOINFER_SANITIZED
  GTEST_SKIP() << "sanitizers reserve more address space than the cap allows";
#else
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (64 << 20);
    const rlimit limit{cap, cap};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    int code = 2;  // no error: every thread started despite the cap
    try {
      ThreadPool pool(400);  // 400 x 8 MiB stacks cannot fit in 64 MiB
    } catch (const Error& e) {
      const std::string m = e.what();
      (void)!::write(fds[1], m.data(), m.size());
      code = 0;
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 600 && done == 0; ++i) {  // up to 60 s
    done = ::waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    ::close(fds[0]);
    FAIL() << "the pool hung when the OS refused a thread";
  }
  std::string message(4096, '\0');
  const ssize_t n = ::read(fds[0], message.data(), message.size());
  message.resize(n > 0 ? static_cast<size_t>(n) : 0);
  ::close(fds[0]);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_THAT(message, ::testing::StartsWith("thread pool: the system refused to start thread "));
  EXPECT_THAT(message, ::testing::HasSubstr(" of 400 ("));
  EXPECT_EQ(message.find('\n'), std::string::npos);
#endif
}

TEST(ThreadPool, ClampThreadsLimitsToTheCpusWithAWarning) {
  const int cpus = ThreadPool::logical_cpus();
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::string warning;
  EXPECT_EQ(ThreadPool::clamp_threads(0, &warning), ThreadPool::physical_cores());
  EXPECT_EQ(ThreadPool::clamp_threads(1, &warning), 1);
  EXPECT_EQ(ThreadPool::clamp_threads(cpus, &warning), cpus);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(ThreadPool::clamp_threads(100000, &warning), cpus);
  EXPECT_EQ(warning, fmt::format("nanoinfer: warning: 100000 threads requested but this process "
                                 "can run on {} CPUs; using {} (more threads than CPUs only wait "
                                 "for each other)",
                                 cpus, cpus));
  EXPECT_THROW(ThreadPool::clamp_threads(-1, &warning), Error);
}

}  // namespace
}  // namespace nanoinfer
