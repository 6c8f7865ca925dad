// The bad-input table's cases that are more than one row: the thread-count clamps, a context
// the machine cannot hold, perplexity over one scored token. Each ends as the table's rows do:
// a one-line message, never a crash.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanoinfer/thread_pool.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using MoreJson = nlohmann::ordered_json;

void tiny_model(const fs::path& d) {
  test::write_tiny_model_dir(d / "m");
}

// -t above the CPU count is clamped with a warning (the loader calls ThreadPool::clamp_threads);
// before, -t 100000 started 32,437 threads and exhausted the process table. 512 is far above
// any CI machine's CPU count yet harmless if run before the clamp exists; if a machine has
// more CPUs the test is skipped.
TEST(BadInputTable, ThreadCountIsClampedWithAWarning) {
  if (ThreadPool::logical_cpus() >= 512) GTEST_SKIP() << "512 CPUs or more";
  test::TempDir dir;
  tiny_model(dir.path());
  const test::CliProcess r =
      test::run_cli_process({"generate", "-m", (dir / "m").string(), "-p", "hi", "-n", "2", "-t", "512"});
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::StartsWith("nanoinfer: warning: 512 threads requested but this process can run on"));
}

// quantize and bench quant go through the same clamp as every command (unclamped, -t 300 would
// run 599 threads and -t 100000 start 32,393). The count the pools ran with is reported and
// checked.
TEST(BadInputTable, QuantizeThreadCountIsClampedWithAWarning) {
  if (ThreadPool::logical_cpus() >= 512) GTEST_SKIP() << "512 CPUs or more";
  test::TempDir dir;
  tiny_model(dir.path());
  const test::CliProcess r = test::run_cli_process({"quantize", "-m", (dir / "m").string(), "--type", "int8",
                                                    "--method", "rtn", "-t", "512", "--out", (dir / "q").string()});
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::StartsWith("nanoinfer: warning: 512 threads requested but this process can run on"));
  EXPECT_THAT(r.out, ::testing::HasSubstr(fmt::format(" s on {} threads\n", ThreadPool::logical_cpus())));
}

TEST(BadInputTable, BenchQuantThreadCountIsClampedOnce) {
  if (ThreadPool::logical_cpus() >= 512) GTEST_SKIP() << "512 CPUs or more";
  test::TempDir dir;
  text_file(dir.path());
  const test::CliProcess r =
      test::run_cli_process({"bench", "quant", "-m", (dir / "m").string(), "-f", (dir / "text.txt").string(), "-c",
                             "16", "--levels", "int8-rtn", "-t", "512", "-o", (dir / "r.jsonl").string()});
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t warnings = 0;
  for (size_t at = 0; (at = r.err.find("nanoinfer: warning: 512 threads", at)) != std::string::npos; ++at) ++warnings;
  EXPECT_EQ(warnings, 1u) << r.err;
  const MoreJson record = MoreJson::parse(test::read_text(dir / "r.jsonl"));
  ASSERT_TRUE(record.contains("quantize_threads")) << record.dump();
  EXPECT_EQ(record["quantize_threads"].get<int>(), ThreadPool::logical_cpus());
}

// A -c within a config's (hostile) limit whose KV cache cannot fit the machine is refused up
// front, naming the flag and the sizes (before: the whole cache was allocated, then bad_alloc).
// tiny-untied with 16M positions: 16,777,216 x (2 x 3 layers x kv dim 64 + head dim 32) x 4 bytes
// = 26 GiB.
TEST(BadInputTable, ContextBeyondTheMachinesMemoryIsRefused) {
  const uint64_t memory =
      static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
  if (memory >= (uint64_t{26} << 30)) GTEST_SKIP() << "this machine has 26 GiB of memory or more";
  test::TempDir dir;
  config_with("max_position_embeddings", "16777216")(dir.path());
  const test::CliProcess r = test::run_cli_process(
      {"generate", "-m", (dir / "m").string(), "-p", "hi", "-n", "1", "-c", "16777216", "--kv-type", "f32"});
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err,
              ::testing::StartsWith("nanoinfer: error: -c 16777216: a context of 16777216 positions needs 26.0 GiB "
                                    "for its KV cache and RoPE tables, more than this machine's"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Perplexity over one scored token has no standard error: "n/a", never "+/- 0.0000".
TEST(BadInputTable, PerplexityOfOneScoredTokenHasNoErrorEstimate) {
  test::TempDir dir;
  tiny_model(dir.path());
  test::write_text(dir / "two.txt", "a b");
  const test::CliProcess r =
      test::run_cli_process({"perplexity", "-m", (dir / "m").string(), "-f", (dir / "two.txt").string()});
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_THAT(r.out, ::testing::HasSubstr("(1 tokens scored")) << "the text must be two tokens: " << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr(" +/- n/a (one token scored: no error estimate) (1 tokens scored"));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("0.0000 (")));
  const test::CliProcess j =
      test::run_cli_process({"perplexity", "-m", (dir / "m").string(), "-f", (dir / "two.txt").string(), "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_TRUE(MoreJson::parse(j.out).at("perplexity_stderr").is_null()) << j.out;
}

}  // namespace
}  // namespace nanoinfer
