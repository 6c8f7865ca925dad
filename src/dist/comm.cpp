// The world of a tensor-parallel run (nanoinfer/comm.h): MPI when the build has it and a
// launcher started the process, one rank otherwise.
#include "nanoinfer/comm.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nanoinfer/error.h"

#if NANOINFER_HAVE_MPI
#include <mpi.h>
#endif

namespace nanoinfer {

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

bool mpi_built() {
  return NANOINFER_HAVE_MPI != 0;
}

#if NANOINFER_HAVE_MPI

namespace {

// A failed collective means a peer is gone or the transport broke: one line, and this rank
// ends (the launcher then ends the rest). Waiting would hang the job.
void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "nanoinfer: error: rank %d: %s failed (%s): another rank of the job ended\n", rank, what, text);
  std::fflush(stderr);
  std::_Exit(1);
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// The launcher ends the other ranks with SIGTERM when one rank dies: rank 0 says so in one
// line instead of vanishing. The text is made before any signal can arrive (write() and
// _exit() are all a handler may call).
char g_term_line[160];
size_t g_term_length = 0;

void on_launcher_term(int) {
  ssize_t unused = ::write(STDERR_FILENO, g_term_line, g_term_length);
  (void)unused;
  ::_exit(1);
}

void say_why_on_sigterm(int rank) {
  struct sigaction current = {};
  if (sigaction(SIGTERM, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  const int n = std::snprintf(g_term_line, sizeof g_term_line,
                              "nanoinfer: error: rank %d: ended by the MPI launcher: another rank of the job died, "
                              "was killed or failed\n",
                              rank);
  g_term_length = n > 0 ? std::min(static_cast<size_t>(n), sizeof g_term_line - 1) : 0;
  struct sigaction action = {};
  action.sa_handler = on_launcher_term;
  sigaction(SIGTERM, &action, nullptr);
}

int to_int(size_t n) {
  if (n > static_cast<size_t>(INT32_MAX)) fail("MPI message of {} elements is too large", n);
  return static_cast<int>(n);
}

}  // namespace

Comm& world() {
  static Comm* const comm = [] {
    auto* c = new Comm();  // lives to the process's end: MPI_Finalize runs at exit
    if (!launched_by_mpi()) return c;
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    std::atexit(finalize_mpi);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED) fail("the MPI library does not support calls from more than one thread");
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size_);
    if (c->size_ > 1) say_why_on_sigterm(c->rank_);
    return c;
  }();
  return *comm;
}

void Comm::allreduce_sum(float* data, size_t n) {
  if (size_ == 1 || skip_allreduce_ || n == 0) return;
  if (size_ == 2) {
    // a + b == b + a exactly: both ranks get the same bits from MPI's own reduction, which
    // moves no more than n floats each way (recursive doubling, or a ring's two halves).
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, to_int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    return;
  }
  // More ranks: MPI may associate the sum differently on each rank, so the sum is made here,
  // in rank order. Both ways below give the same bits; the gathered sum is one collective (the
  // fewer messages for a short vector), the scattered one moves 2 (N - 1) / N of the vector
  // per rank instead of N - 1 whole vectors.
  if (n < scatter_from_floats_) {
    sum_gathered_parts(data, n);
  } else {
    sum_scattered_slices(data, n);
  }
}

// Every rank gathers every rank's whole part and adds them in rank order.
void Comm::sum_gathered_parts(float* data, size_t n) {
  const auto ranks = static_cast<size_t>(size_);
  if (scratch_.size() < n * ranks) scratch_.resize(n * ranks);
  check_mpi(MPI_Allgather(data, to_int(n), MPI_FLOAT, scratch_.data(), to_int(n), MPI_FLOAT, MPI_COMM_WORLD),
            "MPI_Allgather");
  std::memcpy(data, scratch_.data(), n * sizeof(float));
  for (size_t r = 1; r < ranks; ++r) {
    const float* part = scratch_.data() + r * n;
    for (size_t i = 0; i < n; ++i) data[i] += part[i];
  }
}

// A reduce-scatter in rank order and an allgather: rank r receives slice r of every rank's
// part (an all-to-all), adds those N slices in rank order, and the sums are gathered back into
// every rank's `data`.
void Comm::sum_scattered_slices(float* data, size_t n) {
  const auto ranks = static_cast<size_t>(size_);
  const auto me = static_cast<size_t>(rank_);
  slice_counts_.resize(ranks);
  slice_offsets_.resize(ranks);
  for (size_t r = 0, at = 0; r < ranks; ++r) {
    const size_t count = n / ranks + (r < n % ranks ? 1 : 0);  // the first n % N slices one longer
    slice_counts_[r] = to_int(count);
    slice_offsets_[r] = to_int(at);
    at += count;
  }
  const auto mine = static_cast<size_t>(slice_counts_[me]);
  if (scratch_.size() < mine * ranks) scratch_.resize(mine * ranks);
  // Rank r's slice lands at scratch_[r * mine]: every rank sends this rank `mine` floats.
  receive_counts_.assign(ranks, slice_counts_[me]);
  receive_offsets_.resize(ranks);
  for (size_t r = 0; r < ranks; ++r) receive_offsets_[r] = to_int(r * mine);
  check_mpi(MPI_Alltoallv(data, slice_counts_.data(), slice_offsets_.data(), MPI_FLOAT, scratch_.data(),
                          receive_counts_.data(), receive_offsets_.data(), MPI_FLOAT, MPI_COMM_WORLD),
            "MPI_Alltoallv");
  float* sum = data + slice_offsets_[me];
  std::copy_n(scratch_.data(), mine, sum);  // (not memcpy: a rank's slice may be empty, scratch_ too)
  for (size_t r = 1; r < ranks; ++r) {
    const float* part = scratch_.data() + r * mine;
    for (size_t i = 0; i < mine; ++i) sum[i] += part[i];
  }
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, slice_counts_.data(), slice_offsets_.data(), MPI_FLOAT,
                           MPI_COMM_WORLD),
            "MPI_Allgatherv");
}

void Comm::broadcast(void* data, size_t bytes) {
  if (size_ == 1 || bytes == 0) return;
  check_mpi(MPI_Bcast(data, to_int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

void Comm::gather(const float* send, std::span<const size_t> counts, float* out) {
  if (size_ == 1) {
    if (out != send) std::memcpy(out, send, counts[0] * sizeof(float));
    return;
  }
  std::vector<int> sizes(counts.size()), offsets(counts.size());
  size_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    sizes[r] = to_int(counts[r]);
    offsets[r] = to_int(at);
    at += counts[r];
  }
  check_mpi(MPI_Gatherv(send, sizes[static_cast<size_t>(rank_)], MPI_FLOAT, out, sizes.data(), offsets.data(),
                        MPI_FLOAT, 0, MPI_COMM_WORLD),
            "MPI_Gatherv");
}

uint64_t Comm::max(uint64_t value) {
  if (size_ == 1) return value;
  uint64_t out = 0;
  check_mpi(MPI_Allreduce(&value, &out, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return out;
}

void Comm::barrier() {
  if (size_ > 1) check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void Comm::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else  // a build without MPI: one rank

Comm& world() {
  static Comm* const comm = [] {
    if (launched_by_mpi()) {
      fail(
          "this nanoinfer was built without MPI, but an MPI launcher started it: install libopenmpi-dev and rebuild "
          "to run tensor-parallel (docs/SCALING.md)");
    }
    return new Comm();
  }();
  return *comm;
}

void Comm::allreduce_sum(float*, size_t) {}
void Comm::broadcast(void*, size_t) {}
void Comm::gather(const float* send, std::span<const size_t> counts, float* out) {
  if (out != send) std::memcpy(out, send, counts[0] * sizeof(float));
}
uint64_t Comm::max(uint64_t value) {
  return value;
}
void Comm::barrier() {}
void Comm::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

#endif

}  // namespace nanoinfer
