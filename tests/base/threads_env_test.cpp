// NANOINFER_THREADS: the default of every -t (generate, quantize, bench generate, bench
// bandwidth, ... all go through common_options), a -t on the command line wins, and a value that
// is not a thread count is a one-line error naming the variable.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

class ThreadsEnv : public ::testing::Test {
 protected:
  void SetUp() override { test::write_tiny_model_dir(dir_.path()); }
  test::CliProcess run(const std::vector<std::string>& args, const std::string& threads) {
    test::CliOptions options;
    options.env = {"NANOINFER_THREADS=" + threads};
    return test::run_cli_process(args, options);
  }
  std::vector<std::string> generate(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"generate", "-m", dir_.path().string(), "-p", "the king", "-n", "4",
                                  "--temp",   "0",  "--verbose"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  test::TempDir dir_;
};

void expect_env_error(const test::CliProcess& r, const std::string& value) {
  EXPECT_TRUE(r.exited);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("nanoinfer: error: NANOINFER_THREADS='" + value + "'", 0), 0u) << r.err;
}

TEST_F(ThreadsEnv, IsTheDefaultOfDashTAndTheFlagWins) {
  // 1 thread from the variable: the verbose model line says so.
  const auto one = run(generate(), "1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find(", 1 threads,"), std::string::npos) << one.err;
  // A count past this machine's CPUs reaches the clamp, which warns naming the count asked for.
  const auto many = run(generate(), "100000");
  ASSERT_EQ(many.exit_code, 0) << many.err;
  EXPECT_NE(many.err.find("100000 threads requested"), std::string::npos) << many.err;
  EXPECT_EQ(many.out, one.out);
  // -t given: the variable is not used (not even read: an invalid value does not matter).
  for (const std::string value : {"100000", "abc"}) {
    const auto flag = run(generate({"-t", "1"}), value);
    ASSERT_EQ(flag.exit_code, 0) << flag.err;
    EXPECT_NE(flag.err.find(", 1 threads,"), std::string::npos) << flag.err;
    EXPECT_EQ(flag.err.find("threads requested"), std::string::npos) << flag.err;
    EXPECT_EQ(flag.out, one.out);
  }
  // Empty is unset.
  const auto empty = run(generate(), "");
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
}

TEST_F(ThreadsEnv, InvalidValuesAreOneLineErrorsNamingTheVariable) {
  for (const std::string value : {"abc", "-1", "2x", " 2", "1,2", "99999999999999999999"}) {
    SCOPED_TRACE(value);
    expect_env_error(run(generate(), value), value);
  }
  // Every command with -t reads it the same way.
  const test::TempDir out;
  expect_env_error(
      run({"quantize", "-m", dir_.path().string(), "--type", "int8", "--method", "rtn", "--out", (out / "q").string()},
          "two"),
      "two");
  EXPECT_FALSE(std::filesystem::exists(out / "q"));
  expect_env_error(run({"bench", "bandwidth", "--size-mib", "1", "-r", "1"}, "x"), "x");
  expect_env_error(run({"bench", "generate", "-m", dir_.path().string(), "-p", "4", "-n", "2", "-r", "1", "-o", "jsonl",
                        "--results", (out / "results.jsonl").string()},
                       "1,x"),
                   "1,x");
}

TEST_F(ThreadsEnv, BenchGenerateTakesAListAsItsDashTDoes) {
  const test::TempDir out;
  const auto r = run({"bench", "generate", "-m", dir_.path().string(), "-p", "4", "-n", "2", "-r", "1", "-o", "jsonl",
                      "--results", (out / "results.jsonl").string()},
                     "1,1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> records;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  // Two thread counts x (one prefill + one decode test).
  ASSERT_EQ(records.size(), 4u) << r.out;
  for (const auto& rec : records) EXPECT_EQ(rec["n_threads"], 1) << rec.dump();
}

}  // namespace
}  // namespace nanoinfer
