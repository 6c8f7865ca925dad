// The ranks of a tensor-parallel run and the few collectives the sharded forward pass needs
// (docs/SCALING.md). One process is one rank of a world: under `mpirun -np N` (or srun) the
// world has N ranks over MPI; otherwise, or in a build without MPI, it has one rank and every
// collective is a no-op (broadcast and gather copy nothing, a sum of one part is that part).
//
// MPI is touched only when the environment says the process was launched by an MPI launcher
// (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE): a plain run never initializes it. The first
// call of world() initializes it (MPI_THREAD_SERIALIZED: the callers serialize their calls,
// the model under its pool lock) and registers MPI_Finalize to run at exit.
//
// Every collective is called by every rank in the same order. A failed collective (a rank
// died, the network broke) prints one line and ends the process: nothing waits for a peer
// that is gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace nanoinfer {

class Comm {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }

  // data[0 .. n) becomes the sum over the ranks, in place; every rank ends with the same bits:
  // each element is the left-to-right sum of the ranks' parts in rank order (with two ranks,
  // MPI's a + b, the same bits either way). With more than two ranks a vector shorter than
  // kScatterFromFloats is gathered whole on every rank and summed there (one collective,
  // N - 1 vectors received per rank); a longer one is reduce-scattered in rank order and
  // allgathered (2 (N - 1) / N of the vector sent and received per rank). The only collective
  // of the forward's hot path: one per o_proj and one per down_proj of every layer.
  void allreduce_sum(float* data, size_t n);
  // Where the scattered sum starts to beat the gathered one: they crossed between 2,048 and
  // 16,384 floats at 3 and 4 ranks on one machine (docs/SCALING.md).
  static constexpr size_t kScatterFromFloats = 8192;
  // Rank 0's bytes to every rank.
  void broadcast(void* data, size_t bytes);
  // Rank r sends counts[r] floats; rank 0 receives them rank after rank into `out` (the sum of
  // counts floats; ignored elsewhere).
  void gather(const float* send, std::span<const size_t> counts, float* out);
  // The largest of every rank's value, on every rank.
  uint64_t max(uint64_t value);
  void barrier();
  // Ends every rank of the job with this exit code (after the caller printed why).
  [[noreturn]] void abort(int code);

  // Testing only: makes allreduce_sum leave each rank's part as it is (a missing all-reduce),
  // so a test can show that its tolerance catches such a bug. Set on every rank alike.
  void skip_allreduce_for_testing(bool skip) { skip_allreduce_ = skip; }
  // The length from which allreduce_sum (N > 2) scatters instead of gathering (both give the
  // same bits), for a test or a benchmark to run either way. Set on every rank alike.
  void set_scatter_from(size_t floats) { scatter_from_floats_ = floats; }

 private:
  friend Comm& world();
  Comm() = default;
  int rank_ = 0;
  int size_ = 1;
  bool skip_allreduce_ = false;
  size_t scatter_from_floats_ = kScatterFromFloats;
  void sum_gathered_parts(float* data, size_t n);
  void sum_scattered_slices(float* data, size_t n);
  // allreduce_sum with more than two ranks: the slices' counts and offsets in the vector, where
  // each rank's slice lands in scratch_, and scratch_ itself ([size][n] gathered, [size][this
  // rank's slice] scattered; grown to the largest). Kept so that a decode step allocates nothing.
  std::vector<int> slice_counts_, slice_offsets_, receive_counts_, receive_offsets_;
  std::vector<float> scratch_;
};

// The world of this process (initialized on first use, as above). Throws Error when the
// process was launched by an MPI launcher but the build has no MPI.
Comm& world();
// Whether the environment says an MPI launcher started this process.
bool launched_by_mpi();
// Whether this build can run over MPI (MPI was found when it was configured).
bool mpi_built();

}  // namespace nanoinfer
