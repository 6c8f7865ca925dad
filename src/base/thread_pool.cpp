#include "nanoinfer/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "base/thread_pool_testing.h"
#include "nanoinfer/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nanoinfer {
namespace {

// The pool whose job the current thread is running, if any; a parallel_for that finds its
// own pool here is nested and must not wait for workers that are busy running its parent.
thread_local const ThreadPool* tls_running_pool = nullptr;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// An idle worker spins until the caller has published no job for this long, then sleeps.
// Decode publishes a job every few tens of microseconds; spinning across the gaps saves a
// futex wake-up per job, and sleeping after a quiet stretch leaves the cores to other
// processes when the engine is idle.
constexpr int64_t kSpinBeforeSleepNs = 200'000;
// Pauses between looks at the clock; a spinning worker also yields its CPU there (~12 us
// apart on Zen 5, whose pause takes ~45 ns). Without the yield, a worker the scheduler has
// put on the caller's CPU spins away the caller's time slice while the caller waits for it.
constexpr int kSpinsPerCheck = 256;
// The caller, once no chunk is left to claim, spins this long for the chunks workers are
// still running before it yields between checks (a worker descheduled mid-chunk).
constexpr int64_t kCallerSpinNs = 50'000;

// Contention. When no worker claimed a chunk of kMissesBeforeSolo jobs in a row (their
// cores are busy with other processes), or the caller waited for a worker's chunk longer
// than it worked itself (plus kStallSlackNs; a worker descheduled mid-chunk), the calls of
// the next stretch run on the caller alone and the workers go to sleep instead of competing
// with it for CPU time. The stretch starts at kFirstSoloNs and doubles, up to kLongestSoloNs,
// each time the workers fail again before kGoodToForget jobs in a row went well (helped, no
// stall); such a run resets it. On a machine where one core is busy with another process a
// worker still helps with some jobs, but too few to pay for the stalls: the doubling keeps
// the pool mostly on the caller there, and on an idle machine a few milliseconds reset it.
constexpr int kMissesBeforeSolo = 16;
constexpr int kGoodToForget = 64;
constexpr int64_t kStallSlackNs = 20'000;
constexpr int64_t kFirstSoloNs = 1'000'000;
constexpr int64_t kLongestSoloNs = 64'000'000;

}  // namespace

namespace test_hooks {
std::atomic<int> fail_thread_start_after{-1};
std::atomic<bool> hold_workers{false};
}  // namespace test_hooks

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads < 0) fail("thread pool: thread count must be >= 0 (0 = physical cores), got {}", n_threads);
  n_threads_ = n_threads == 0 ? physical_cores() : n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    try {
      if (test_hooks::fail_thread_start_after.load() == static_cast<int>(workers_.size()))
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
      workers_.emplace_back([this] { worker_main(); });
    } catch (const std::system_error& e) {
      // Without this the vector's destructor would meet joinable threads (std::terminate),
      // and a half-started pool would wait forever for workers that do not exist.
      const size_t started = workers_.size();
      stop_workers();
      fail(
          "thread pool: the system refused to start thread {} of {} ({}); the {} worker(s) "
          "started were stopped. Use fewer threads (-t) or raise the process limit (ulimit -u)",
          i + 1, n_threads_, e.what(), started);
    }
  }
}

ThreadPool::~ThreadPool() {
  stop_workers();
}

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard lock(sleep_mutex_);
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

size_t ThreadPool::chunk_size(size_t n, size_t grain, int threads, size_t chunks_per_thread) {
  if (grain == 0) grain = 1;
  if (chunks_per_thread == 0) chunks_per_thread = kChunksPerThread;
  const size_t grains = n / grain + (n % grain != 0);
  const size_t wanted = static_cast<size_t>(threads > 1 ? threads : 1) * chunks_per_thread;
  const size_t per_chunk = grains <= wanted ? 1 : grains / wanted + (grains % wanted != 0);
  return per_chunk * grain;
}

void ThreadPool::run_chunk(size_t index) noexcept {
  const size_t begin = index * job_.chunk;
  const size_t end = std::min(job_.n, begin + job_.chunk);
  try {
    (*job_.fn)(begin, end);
  } catch (...) {
    std::lock_guard lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

size_t ThreadPool::run_chunks(bool worker) noexcept {
  size_t ran = 0;
  for (;;) {
    // A claim may land on a later job than the one that woke this thread (the caller moved
    // on while it was descheduled); it is then a chunk of that job, which cannot finish
    // without it, so job_ is stable until finished_ counts it.
    const int64_t r = remaining_.fetch_sub(1, std::memory_order_acquire);
    if (r <= 0) return ran;
    run_chunk(job_.chunks - static_cast<size_t>(r));
    ++ran;
    if (worker) finished_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::worker_main() {
  tls_running_pool = this;
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    // Spin while the caller keeps publishing jobs: the deadline runs from its last job, not
    // from when this thread began to spin, so a worker the OS descheduled for a while does
    // not come back to an expired deadline and sleep in the middle of a busy stretch.
    for (int spins = 1; gen == seen; ++spins) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
      if (spins % kSpinsPerCheck == 0 && gen == seen) {
        if (now_ns() - last_publish_ns_.load(std::memory_order_relaxed) > kSpinBeforeSleepNs) break;
        sched_yield();
      }
    }
    if (gen == seen) {
      // Announce the sleep before re-checking generation_ (both seq_cst): either the caller
      // sees sleepers_ > 0 and notifies under the mutex, or this check sees its bump.
      std::unique_lock lock(sleep_mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_relaxed)) return;
    while (test_hooks::hold_workers.load(std::memory_order_relaxed)) std::this_thread::yield();
    run_chunks(true);
  }
}

void ThreadPool::wait_for_workers(size_t target) {
  const int64_t deadline = now_ns() + kCallerSpinNs;
  bool spinning = true;
  for (int spins = 1; finished_.load(std::memory_order_acquire) != target; ++spins) {
    if (spinning) {
      cpu_relax();
      if (spins % kSpinsPerCheck == 0 && now_ns() > deadline) spinning = false;
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::parallel_for(size_t n, size_t grain, RangeFn fn, size_t chunks_per_thread) {
  if (grain == 0) grain = 1;
  if (n == 0) return;
  const size_t chunk = chunk_size(n, grain, n_threads_, chunks_per_thread);
  // One chunk, one thread, or a call from inside a chunk (whose workers are busy with the
  // parent): run it all here, at once.
  if (n_threads_ == 1 || n <= chunk || tls_running_pool == this) {
    fn(0, n);
    return;
  }

  std::lock_guard call_lock(call_mutex_);
  joins_.store(joins_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const size_t chunks = n / chunk + (n % chunk != 0);
  chunks_.store(chunks_.load(std::memory_order_relaxed) + chunks, std::memory_order_relaxed);
  job_ = Job{n, chunk, chunks, &fn};
  error_ = nullptr;
  const int64_t start = now_ns();
  if (start < solo_until_ns_) {
    // Contention: the same chunks, in order, on this thread only.
    tls_running_pool = this;
    for (size_t i = 0; i < chunks; ++i) run_chunk(i);
    tls_running_pool = nullptr;
  } else {
    finished_.store(0, std::memory_order_relaxed);
    remaining_.store(static_cast<int64_t>(chunks), std::memory_order_release);
    last_publish_ns_.store(start, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      // Taking the mutex orders this notify after any sleeper's predicate check.
      { std::lock_guard lock(sleep_mutex_); }
      wake_.notify_all();
    }

    tls_running_pool = this;
    const size_t mine = run_chunks(false);
    tls_running_pool = nullptr;
    bool stalled = false;
    if (mine < chunks) {
      const int64_t own_end = now_ns();
      wait_for_workers(chunks - mine);
      stalled = now_ns() - own_end > own_end - start + kStallSlackNs;
    }
    adapt(mine < chunks, stalled);
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::adapt(bool helped, bool stalled) {
  if (helped && !stalled) {
    misses_ = 0;
    if (++good_ >= kGoodToForget) solo_ns_ = 0;
    return;
  }
  if (!stalled && ++misses_ < kMissesBeforeSolo) return;
  const int64_t stretch = std::max(solo_ns_, kFirstSoloNs);
  misses_ = 0;
  good_ = 0;
  solo_until_ns_ = now_ns() + stretch;
  solo_ns_ = std::min(2 * stretch, kLongestSoloNs);
}

int ThreadPool::logical_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) > 0) return CPU_COUNT(&allowed);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

int ThreadPool::clamp_threads(int requested, std::string* warning) {
  if (requested < 0) fail("the thread count must be >= 1 (or 0 = one per physical core), got {}", requested);
  if (requested == 0) return physical_cores();
  const int cpus = logical_cpus();
  if (requested <= cpus) return requested;
  const std::string message = fmt::format(
      "nanoinfer: warning: {} threads requested but this process can run on {} CPUs; using {} "
      "(more threads than CPUs only wait for each other)",
      requested, cpus, cpus);
  if (warning != nullptr) {
    *warning = message;
  } else {
    std::fprintf(stderr, "%s\n", message.c_str());
  }
  return cpus;
}

int ThreadPool::physical_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }
  std::set<std::pair<int, int>> cores;  // (package, core)
  int cpus = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    ++cpus;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = -1, core = -1;
    std::ifstream(dir + "physical_package_id") >> package;
    std::ifstream(dir + "core_id") >> core;
    // Without topology information count every allowed CPU as its own core.
    if (package < 0 || core < 0)
      cores.emplace(-1, cpu);
    else
      cores.emplace(package, core);
  }
  if (cores.empty()) return cpus > 0 ? cpus : 1;
  return static_cast<int>(cores.size());
}

}  // namespace nanoinfer
