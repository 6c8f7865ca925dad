// The tensor-parallel split reads each rank's slices with pread: from a sharded checkpoint it
// reads them from each tensor's own shard, and the split model's logits are bitwise those of
// the split of the single file. Run under mpirun by ctest (tensor_parallel_np2, _np3); alone it
// skips.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <vector>

#include "nanoinfer/comm.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/sharded.h"

namespace nanoinfer {
namespace {

// Rank 0: the logits of a prompt and 6 greedy steps of the split model at `dir`; the other
// ranks follow until rank 0 is done with it (the load is collective).
std::vector<float> split_logits(const std::filesystem::path& dir) {
  ModelOptions options;
  options.max_context = 32;
  options.threads = 1;
  options.tensor_parallel = true;
  Model model = open_model_alone(dir, options);
  if (model.follower()) {
    model.follow();
    return {};
  }
  std::vector<int32_t> tokens;
  return test::prompt_and_greedy_logits(model, 6, &tokens);
}

TEST(TensorParallelShards, SplitOfShardsIsBitwiseTheSplitOfTheFile) {
  if (!mpi_built() || !world().distributed()) {
    std::printf("skipped: needs MPI and mpirun -np 2 or more (ctest runs it as tensor_parallel_np2 / _np3)\n");
    GTEST_SKIP();
  }
  for (const char* name : {"tiny-qwen3", "tiny-untied"}) {
    const std::filesystem::path dir = test::tiny_models_dir() / name;
    const test::TempDir tmp;  // one per rank: each writes its own copy
    test::write_sharded_copy(dir, tmp / "sharded", 3);
    const std::vector<float> whole = split_logits(dir);
    const std::vector<float> sharded = split_logits(tmp / "sharded");
    if (world().rank() != 0) continue;
    ASSERT_FALSE(whole.empty());
    EXPECT_TRUE(test::same_bits(whole, sharded)) << name;
  }
}

}  // namespace
}  // namespace nanoinfer
