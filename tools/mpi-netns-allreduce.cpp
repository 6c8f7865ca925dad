// The all-reduce probe of tools/mpi-netns: MPI_Allreduce(MPI_SUM) of f32 vectors, timed call by call.
//
//   mpicxx -O2 -std=c++20 -o allreduce tools/mpi-netns-allreduce.cpp
//   mpirun -np 2 ./allreduce --floats 896,8192 --reps 1000 --warmup 100
//
// For each size it runs --warmup untimed calls, then --reps timed ones back to back (as a decode
// step issues them: no barrier in between). A call's latency is the longest any rank measured for
// it (MPI_Wtime around the call); rank 0 prints one JSON line per size with the median, minimum,
// mean and 90th percentile of those latencies in microseconds. The sum is checked against the
// closed form of the values the ranks contribute, so a transport that corrupts or drops data fails.
// The MPI C++ bindings are not used (and warn under -Wextra).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct ProbeArgs {
  std::vector<long> floats;
  long reps = 1000;
  long warmup = 100;
};

bool parse_count(const char* text, long* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > (1L << 28)) return false;
  *out = v;
  return true;
}

// Returns an empty string when the arguments are valid, else the one-line reason.
std::string parse_probe_args(int argc, char** argv, ProbeArgs* a) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return flag + " needs a value";
    const char* value = argv[++i];
    if (flag == "--floats") {
      std::string list = value;
      size_t at = 0;
      while (at <= list.size()) {
        size_t comma = std::min(list.find(',', at), list.size());
        long n = 0;
        if (!parse_count(list.substr(at, comma - at).c_str(), &n)) return "--floats: not a list of counts: " + list;
        a->floats.push_back(n);
        at = comma + 1;
      }
    } else if (flag == "--reps") {
      if (!parse_count(value, &a->reps)) return std::string("--reps: not a count >= 1: ") + value;
    } else if (flag == "--warmup") {
      if (!parse_count(value, &a->warmup)) return std::string("--warmup: not a count >= 1: ") + value;
    } else {
      return "unknown argument " + flag + " (--floats N,N,... --reps N --warmup N)";
    }
  }
  if (a->floats.empty()) return "--floats N,N,... is required";
  return "";
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Times one size; returns false (after printing why on rank 0) when the sum is wrong.
bool probe_size(long n, const ProbeArgs& a, int rank, int ranks) {
  // Rank r contributes r + 1 + i % 7 at element i, so the sum is ranks * (ranks + 1) / 2 + ranks * (i % 7).
  std::vector<float> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) send[static_cast<size_t>(i)] = static_cast<float>(rank + 1 + i % 7);
  for (long i = 0; i < a.warmup; ++i) MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  std::vector<double> mine(static_cast<size_t>(a.reps));
  for (long i = 0; i < a.reps; ++i) {
    double t0 = MPI_Wtime();
    MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    mine[static_cast<size_t>(i)] = (MPI_Wtime() - t0) * 1e6;
  }
  int bad = 0;
  for (long i = 0; i < n && !bad; ++i) {
    double want = ranks * (ranks + 1) / 2.0 + static_cast<double>(ranks) * static_cast<double>(i % 7);
    bad = std::fabs(recv[static_cast<size_t>(i)] - want) > 0.0 ? 1 : 0;
  }
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  std::vector<double> slowest(mine.size());
  MPI_Reduce(mine.data(), slowest.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank != 0) return any_bad == 0;
  if (any_bad) {
    std::fprintf(stderr, "allreduce probe: the sum of %ld floats over %d ranks is wrong\n", n, ranks);
    return false;
  }
  double mean = 0;
  for (double v : slowest) mean += v / static_cast<double>(slowest.size());
  std::printf(
      "{\"floats\": %ld, \"bytes\": %ld, \"ranks\": %d, \"reps\": %ld, \"median_us\": %.3f, \"min_us\": %.3f, "
      "\"mean_us\": %.3f, \"p90_us\": %.3f}\n",
      n, n * 4, ranks, a.reps, percentile(slowest, 0.5), *std::min_element(slowest.begin(), slowest.end()), mean,
      percentile(slowest, 0.9));
  std::fflush(stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  ProbeArgs a;
  std::string error = parse_probe_args(argc, argv, &a);
  if (!error.empty()) {
    if (rank == 0) std::fprintf(stderr, "allreduce probe: %s\n", error.c_str());
    MPI_Finalize();
    return 2;
  }
  bool ok = true;
  for (long n : a.floats) ok = probe_size(n, a, rank, ranks) && ok;
  MPI_Finalize();
  return ok ? 0 : 1;
}
