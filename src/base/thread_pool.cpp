#include "nanoinfer/thread_pool.h"

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <system_error>
#include <set>
#include <string>
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

// How long an idle worker spins before it sleeps. Decode issues a few hundred parallel_for
// calls per token with short serial gaps between them; spinning across those gaps saves a
// futex wake-up (several microseconds) per call, and sleeping after a while leaves the cores
// to other processes when the engine is idle.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(200);
// The caller, once its own range is done, spins this long before yielding between checks.
constexpr auto kSpinBeforeYield = std::chrono::microseconds(50);

}  // namespace

namespace test_hooks {
std::atomic<int> fail_thread_start_after{-1};
}  // namespace test_hooks

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads < 0) fail("thread pool: thread count must be >= 0 (0 = physical cores), got {}", n_threads);
  n_threads_ = n_threads == 0 ? physical_cores() : n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    try {
      if (test_hooks::fail_thread_start_after.load() == static_cast<int>(workers_.size()))
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
      workers_.emplace_back([this, i] { worker_main(i); });
    } catch (const std::system_error& e) {
      // Without this the vector's destructor would meet joinable threads (std::terminate),
      // and a half-started pool would wait forever for workers that do not exist.
      const size_t started = workers_.size();
      stop_workers();
      fail("thread pool: the system refused to start thread {} of {} ({}); the {} worker(s) "
           "started were stopped. Use fewer threads (-t) or raise the process limit (ulimit -u)",
           i + 1, n_threads_, e.what(), started);
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

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

size_t ThreadPool::range_begin(size_t n, size_t grain, size_t parts, size_t i) {
  if (i >= parts) return n;
  const size_t grains = n / grain + (n % grain != 0);
  // ceil(grains * i / parts): earlier ranges get the extra grains, so range 0 (the caller's)
  // is never empty. 128-bit product so huge n cannot overflow.
  const size_t g = static_cast<size_t>((static_cast<unsigned __int128>(grains) * i + parts - 1) / parts);
  const size_t begin = g * grain;
  return begin < n ? begin : n;
}

void ThreadPool::run_range(int index, const Job& job) noexcept {
  const size_t parts = static_cast<size_t>(n_threads_);
  const size_t begin = range_begin(job.n, job.grain, parts, static_cast<size_t>(index));
  const size_t end = range_begin(job.n, job.grain, parts, static_cast<size_t>(index) + 1);
  if (begin >= end) return;
  try {
    (*job.fn)(begin, end);
  } catch (...) {
    std::lock_guard lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_main(int index) {
  tls_running_pool = this;
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      const auto deadline = std::chrono::steady_clock::now() + kSpinBeforeSleep;
      for (int spins = 0; gen == seen; ++spins) {
        cpu_relax();
        gen = generation_.load(std::memory_order_acquire);
        if ((spins & 255) == 255 && std::chrono::steady_clock::now() > deadline) break;
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
    run_range(index, job_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::wait_for_workers() {
  const auto deadline = std::chrono::steady_clock::now() + kSpinBeforeYield;
  bool spinning = true;
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spinning) {
      cpu_relax();
      if ((spins & 255) == 255 && std::chrono::steady_clock::now() > deadline) spinning = false;
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::parallel_for(size_t n, size_t grain, RangeFn fn) {
  if (grain == 0) grain = 1;
  if (n == 0) return;
  // One grain or one thread: no other range is non-empty, so no worker needs waking.
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  if (tls_running_pool == this) {
    const size_t parts = static_cast<size_t>(n_threads_);
    for (size_t i = 0; i < parts; ++i) {
      const size_t begin = range_begin(n, grain, parts, i), end = range_begin(n, grain, parts, i + 1);
      if (begin < end) fn(begin, end);
    }
    return;
  }

  std::lock_guard call_lock(call_mutex_);
  job_ = Job{n, grain, &fn};
  error_ = nullptr;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    // Taking the mutex orders this notify after any sleeper's predicate check.
    { std::lock_guard lock(sleep_mutex_); }
    wake_.notify_all();
  }

  tls_running_pool = this;
  run_range(0, job_);
  tls_running_pool = nullptr;
  wait_for_workers();

  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
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
    if (package < 0 || core < 0) cores.emplace(-1, cpu);
    else cores.emplace(package, core);
  }
  if (cores.empty()) return cpus > 0 ? cpus : 1;
  return static_cast<int>(cores.size());
}

}  // namespace nanoinfer
