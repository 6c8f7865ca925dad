// Comm::allreduce_sum against the rank-order sum, bit for bit, both ways it sums over more than
// two ranks (gathered whole, reduce-scattered). ctest runs these tests under `mpirun -np 2`,
// `-np 3` and `-np 4` (comm_allreduce_np2 .. _np4); run alone (one rank) they check that a sum
// of one part is that part.
//
// Every rank computes every rank's part (a function of the rank and the index) and so the
// expected sum: part 0 + part 1 + ... + part N-1, added left to right in float, as the forward
// pass's determinism needs. The parts' magnitudes differ by up to 2^40, so another order of the
// additions gives other bits in many elements (checked on the data itself for N > 2: a test
// that any order would pass could not catch a reduce that sums out of order).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nanoinfer/comm.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer {
namespace {

// Rank r's part at index i: a sign, a 24-bit mantissa and an exponent in [-20, 20], all from
// one hash, so the parts cancel and round differently at every index.
float allreduce_part(int rank, size_t i) {
  const uint64_t h = SplitMix64{(static_cast<uint64_t>(rank) << 40) ^ i}.next();
  const float mantissa = static_cast<float>(h & 0xFFFFFF) / static_cast<float>(1 << 24) + 0.5f;
  const int exponent = static_cast<int>((h >> 24) % 41) - 20;
  const float v = std::ldexp(mantissa, exponent);
  return (h >> 63) != 0 ? -v : v;
}

// The rank-order sum at index i, and (reverse = true) the same parts added last rank first.
float allreduce_expected(int ranks, size_t i, bool reverse = false) {
  float sum = allreduce_part(reverse ? ranks - 1 : 0, i);
  for (int k = 1; k < ranks; ++k) sum += allreduce_part(reverse ? ranks - 1 - k : k, i);
  return sum;
}

// Lengths around the rank count (shorter than it: some ranks own empty slices), not divisible
// by it, a decode row of Qwen2.5-0.5B (896) and of its intermediate size plus one, both sides
// of Comm::kScatterFromFloats, a large one, and a short one after it (the scratch is kept from
// the largest).
std::vector<size_t> allreduce_lengths(int ranks) {
  const auto n = static_cast<size_t>(ranks);
  const size_t edge = Comm::kScatterFromFloats;
  return {1, n - 1, n, n + 1, 2 * n - 1, 3 * n + 2, 896, 4865, edge - 1, edge, 65537, 5};
}

// Sums every length once; every element must have the rank-order sum's bits.
void expect_rank_order_sums(const char* how) {
  Comm& comm = world();
  const int ranks = comm.size();
  for (size_t n : allreduce_lengths(ranks)) {
    if (n == 0) continue;  // n - 1 on one rank (LengthZeroIsANoOp covers it)
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = allreduce_part(comm.rank(), i);
    comm.allreduce_sum(data.data(), n);
    size_t wrong = 0, first_wrong = n;
    for (size_t i = 0; i < n; ++i) {
      if (std::bit_cast<uint32_t>(data[i]) != std::bit_cast<uint32_t>(allreduce_expected(ranks, i))) {
        if (wrong++ == 0) first_wrong = i;
      }
    }
    EXPECT_EQ(wrong, 0u) << how << ": rank " << comm.rank() << " of " << ranks << ", length " << n << ": first at "
                         << first_wrong << ": " << data[first_wrong] << " against "
                         << allreduce_expected(ranks, first_wrong);
  }
}

// Every length the way allreduce_sum picks, then every length gathered, then scattered (two
// ranks: MPI's own sum each time).
TEST(CommAllreduce, EveryRankGetsTheRankOrderSumBitForBit) {
  Comm& comm = world();
  expect_rank_order_sums("as picked by length");
  comm.set_scatter_from(SIZE_MAX);
  expect_rank_order_sums("gathered");
  comm.set_scatter_from(0);
  expect_rank_order_sums("scattered");
  comm.set_scatter_from(Comm::kScatterFromFloats);
}

// The data tells the orders apart: over a decode row, summing last rank first changes the bits
// of many elements when there are three or more parts.
TEST(CommAllreduce, TheTestDataIsSensitiveToTheOrderOfTheSum) {
  const int ranks = world().size();
  if (ranks < 3) {
    GTEST_SKIP() << "one or two parts add the same in any order";
  }
  int differ = 0;
  for (size_t i = 0; i < 896; ++i) {
    differ += std::bit_cast<uint32_t>(allreduce_expected(ranks, i)) !=
              std::bit_cast<uint32_t>(allreduce_expected(ranks, i, true));
  }
  EXPECT_GT(differ, 896 / 10);
}

// Length 0 is a no-op on every rank (the buffer is not touched), and the next sum is whole.
TEST(CommAllreduce, LengthZeroIsANoOp) {
  Comm& comm = world();
  float untouched = 3.5f;
  comm.allreduce_sum(&untouched, 0);
  EXPECT_EQ(untouched, 3.5f);
  float one = allreduce_part(comm.rank(), 7);
  comm.allreduce_sum(&one, 1);
  EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(allreduce_expected(comm.size(), 7)));
}

}  // namespace
}  // namespace nanoinfer
