// A persistent fork-join pool: workers live as long as the pool, each parallel_for is one
// fork and one join, and a call allocates nothing. The work is cut into chunks of whole grains
// that the calling thread and the workers claim from one atomic counter: the caller starts on
// the first chunk at once, and a worker that wakes late (its core taken by another process)
// finds the chunks already claimed and is not waited for; the caller waits only for chunks a
// worker has claimed. When the workers keep missing jobs, or keep the caller waiting, calls
// run on the caller alone for a stretch while the workers sleep (thread_pool.cpp has the
// rule), so that a busy machine costs at most the speed of one thread.
//
// Which thread runs which chunk varies from call to call, so callers rely on kernels that
// compute every output element the same way for any grain-aligned range of rows
// (kernels/kernels.h promises this for matmul): results are then bitwise identical at any
// thread count and under any load.
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
      FunctionRef(F&& f)
  noexcept  // NOLINT(google-explicit-constructor): implicit, like std::function
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

  // Cuts [0, n) into chunks of chunk_size(n, grain, size(), chunks_per_thread) elements, a whole number of
  // grains (the last chunk ends at n and takes the remainder), and calls fn(begin, end) once
  // per chunk. Chunks are claimed in increasing order by whichever thread asks first: the
  // caller claims until none is left, a worker that wakes in time claims alongside it, and a
  // thread may run several chunks (under contention the caller runs them all, in order).
  // Returns when every chunk is done. Each call cut into several chunks counts one join.
  //
  // Exceptions: if fn throws, the other chunks still run to completion, then the first
  // exception caught (in completion order) is rethrown on the calling thread; the pool stays
  // usable. When there is only one chunk, the pool has one thread, or the call is nested (made
  // from inside fn), fn(0, n) runs once on the calling thread, no join is counted, and an
  // exception propagates at once. Calls from several outside threads are serialised.
  // chunks_per_thread (0: kChunksPerThread) is how finely the work is cut: a tuned product
  // passes its own (nanoinfer/tuning.h).
  void parallel_for(size_t n, size_t grain, RangeFn fn, size_t chunks_per_thread = 0);

  // Fork-joins so far: parallel_for calls cut into several chunks, whether or not contention
  // made the caller run them alone (so the count does not depend on timing); a call run
  // whole on the caller counts nothing. Cheap to read from any thread; for work counts such
  // as barriers per decoded token.
  uint64_t joins() const { return joins_.load(std::memory_order_relaxed); }
  // The chunks those calls were cut into, summed (how finely the work was split, a count that
  // does not depend on timing either).
  uint64_t chunks() const { return chunks_.load(std::memory_order_relaxed); }

  // The chunk length parallel_for uses for n elements in grains of `grain` on `threads`
  // threads: about chunks_per_thread (0: kChunksPerThread) chunks per thread, whole grains
  // each, at least one grain. More chunks than threads let a thread that is on time take the
  // share of one that is not.
  static constexpr size_t kChunksPerThread = 4;
  static size_t chunk_size(size_t n, size_t grain, int threads, size_t chunks_per_thread = 0);

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

 private:
  // The current job, written by the caller while no chunk is claimable and published by the
  // release store of remaining_; a thread reads it only after claiming a chunk of it, and the
  // caller does not rewrite it until every claimed chunk is finished.
  struct Job {
    size_t n = 0;
    size_t chunk = 1;   // elements per chunk
    size_t chunks = 0;  // ceil(n / chunk)
    const RangeFn* fn = nullptr;
  };

  void worker_main();
  void stop_workers() noexcept;
  void run_chunk(size_t index) noexcept;
  // Claims and runs chunks of the current job until none is left; returns how many it ran.
  size_t run_chunks(bool worker) noexcept;
  void wait_for_workers(size_t target);
  // Updates the contention state after a job the workers were offered (thread_pool.cpp).
  void adapt(bool helped, bool stalled);

  int n_threads_;
  std::vector<std::thread> workers_;
  Job job_;
  std::mutex call_mutex_;  // serialises outside callers
  // Contention state, the caller's, under call_mutex_: jobs in a row no worker helped with,
  // jobs in a row that went well, the end of the stretch during which calls run on the
  // caller alone, and the length of the next such stretch.
  int misses_ = 0;
  int good_ = 0;
  int64_t solo_until_ns_ = 0;
  int64_t solo_ns_ = 0;

  // Each hot counter on its own cache line: workers spin on generation_, every thread claims
  // from remaining_, and the caller spins on finished_.
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped once per job, to wake workers
  alignas(64) std::atomic<int64_t> remaining_{0};    // unclaimed chunks; <= 0 when none
  alignas(64) std::atomic<size_t> finished_{0};      // chunks the workers finished this job
  alignas(64) std::atomic<int> sleepers_{0};         // workers blocked (or about to block) on wake_
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> joins_{0};           // written by the caller only
  std::atomic<uint64_t> chunks_{0};          // likewise
  std::atomic<int64_t> last_publish_ns_{0};  // steady clock of the last job, for spinners

  alignas(64) std::mutex sleep_mutex_;
  std::condition_variable wake_;

  std::mutex error_mutex_;  // taken only when fn throws
  std::exception_ptr error_;
};

}  // namespace nanoinfer
