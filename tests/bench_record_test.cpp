#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <sstream>

#include "cli/bench_record.h"
#include "nanoinfer/error.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

TEST(BenchRecord, ContextHasMachineThreadsAndCommit) {
  const auto ctx = bench_context(3);
  EXPECT_EQ(ctx.at("threads"), 3);
  EXPECT_GE(ctx.at("logical_cores").get<int>(), 1);
  EXPECT_FALSE(ctx.at("cpu").get<std::string>().empty());
  EXPECT_FALSE(ctx.at("commit").get<std::string>().empty());
  EXPECT_EQ(ctx.at("nanoinfer_version"), NANOINFER_VERSION);
  const std::string ts = ctx.at("timestamp");
  ASSERT_EQ(ts.size(), 20u);  // 2026-01-02T03:04:05Z
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts.back(), 'Z');
}

TEST(BenchRecord, AppendsOneLinePerRecordAndNeverCreatesDirectories) {
  test::TempDir dir;
  EXPECT_THROW(check_output_path(dir / "nested/bench/results.jsonl"), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "nested"));
  const auto file = dir / "results.jsonl";
  check_output_path(file);
  append_bench_record({{"bench", "a"}, {"value", 1}}, file);
  append_bench_record({{"bench", "b"}, {"value", 2.5}}, file);
  std::istringstream lines(test::read_text(file));
  std::string line;
  std::vector<nlohmann::json> records;
  while (std::getline(lines, line)) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].at("bench"), "a");
  EXPECT_EQ(records[1].at("value"), 2.5);
}

TEST(BenchRecord, PeakRssCoversTouchedMemory) {
  constexpr size_t kBytes = size_t{64} << 20;
  auto buf = std::make_unique<char[]>(kBytes);
  std::memset(buf.get(), 1, kBytes);
  volatile char sink = buf[kBytes / 2];
  (void)sink;
  EXPECT_GE(peak_rss_bytes(), kBytes);
}

}  // namespace
}  // namespace nanoinfer
