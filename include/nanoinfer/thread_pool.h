// A persistent fork-join pool: workers live as long as the pool, each parallel_for is one
// fork and one join, and a call allocates nothing. Work is split statically into contiguous
// ranges (one per thread) so that the caller, not a scheduler, decides which rows go where;
// with kernels that compute every output element the same way, results are then bitwise
// identical at any thread count.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace nanoinfer {

// A non-owning reference to a callable: two words, never allocates (std::function may, for
// captures larger than its small buffer). The callable must outlive the call it is passed to.
template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): implicit, like std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::add_pointer_t<F>>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  using RangeFn = FunctionRef<void(size_t, size_t)>;

  // n_threads counts the calling thread: a pool of size N starts N - 1 workers.
  // 0 means physical_cores(). If the OS refuses a thread (EAGAIN: a process or memory
  // limit), the workers already started are stopped and joined, and nanoinfer::Error is
  // thrown saying how many threads started. The count is not limited here (tests use more
  // threads than CPUs on purpose); callers that take it from a user use clamp_threads().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Splits [0, n) into size() contiguous ranges whose boundaries are multiples of `grain`
  // (the last non-empty range ends at n and takes the remainder). Range i covers grains
  // [ceil(i*g/size()), ceil((i+1)*g/size())) of the g = ceil(n/grain) grains, so ranges differ
  // by at most one grain and range 0 is never smaller than another. fn(begin, end) is called
  // once for each non-empty range; range 0 runs on the calling thread, range i on worker i.
  // Returns when all ranges are done.
  //
  // Exceptions: if fn throws, the other ranges still run to completion, then the first
  // exception caught (in completion order) is rethrown on the calling thread; the pool stays
  // usable. When only one range is non-empty, or the call is nested (made from inside fn),
  // the ranges run one after another on the calling thread, with the same boundaries, and an
  // exception propagates at once. Calls from several outside threads are serialised.
  void parallel_for(size_t n, size_t grain, RangeFn fn);

  // Distinct (package, core) pairs among the CPUs this process may run on; at least 1.
  static int physical_cores();

  // CPUs this process may run on (its affinity mask, so taskset and cpusets count); at least 1.
  static int logical_cpus();

  // The thread count to use for a user's request: 0 becomes physical_cores(); more than
  // logical_cpus() is clamped to it, because a fork-join with more threads than CPUs waits
  // each time for a worker the OS has descheduled (on 2 CPUs, -t 8 decoded 100x slower than
  // -t 2, and -t 100000 exhausted the process table). When it clamps, the one-line warning
  // "nanoinfer: warning: ..." is printed to stderr, or stored in *warning when given.
  // Throws nanoinfer::Error for a negative request.
  static int clamp_threads(int requested, std::string* warning = nullptr);

  // The boundaries parallel_for uses: range i of `parts` is [range_begin(i), range_begin(i+1)).
  static size_t range_begin(size_t n, size_t grain, size_t parts, size_t i);

 private:
  // Job description, written by the caller before it bumps generation_ (release) and read
  // by workers after they observe the bump (acquire).
  struct Job {
    size_t n = 0;
    size_t grain = 1;
    const RangeFn* fn = nullptr;
  };

  void worker_main(int index);
  void stop_workers() noexcept;
  void run_range(int index, const Job& job) noexcept;
  void wait_for_workers();

  int n_threads_;
  std::vector<std::thread> workers_;
  Job job_;
  std::mutex call_mutex_;  // serialises outside callers

  // Each hot counter on its own cache line: workers spin on generation_ while the caller
  // spins on pending_, and neither should bounce the other's line.
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};  // workers still running the current job
  alignas(64) std::atomic<int> sleepers_{0};  // workers blocked (or about to block) on wake_
  std::atomic<bool> stop_{false};

  alignas(64) std::mutex sleep_mutex_;
  std::condition_variable wake_;

  std::mutex error_mutex_;  // taken only when fn throws
  std::exception_ptr error_;
};

}  // namespace nanoinfer
