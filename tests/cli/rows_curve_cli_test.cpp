// `nanoinfer bench generate --rows-curve`: a pass of n rows timed against a decode step, one
// entry per asked count (and the one-row pass it is set against), every bad count refused.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

using test::run_cli;

TEST(RowsCurveCli, ReportsEveryRowCountAgainstADecodeStep) {
  test::TempDir out;
  const std::string results = (out.path() / "results.jsonl").string();
  const auto r = run_cli({"bench", "generate", "-p", "8", "-n", "2", "-r", "1", "-t", "1", "--probe-mib", "0",
                          "--rows-curve", "2,3,9,16", "--results", results});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("a pass of n rows at depth 8"), std::string::npos) << r.out;
  std::istringstream lines(test::read_text(results));
  std::vector<nlohmann::json> curves;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["bench"] == "generate-rows-curve") curves.push_back(j);
  }
  ASSERT_EQ(curves.size(), 1u);
  const nlohmann::json& c = curves[0];
  // 1 is added in front: every count is set against it. 16 rows pass the 8-token prompt: the
  // pass's tokens cycle through it.
  EXPECT_EQ(c["pass_rows"], nlohmann::json({1, 2, 3, 9, 16}));
  EXPECT_EQ(c["n_depth"], 8);
  EXPECT_EQ(c["rounds"], 4);
  for (const char* key : {"pass_ms_median", "pass_ms_min", "pass_cost_relative", "pass_cost_relative_min"}) {
    ASSERT_EQ(c[key].size(), 5u) << key;
    for (const auto& v : c[key]) EXPECT_GT(v.get<double>(), 0.0) << key;
  }
  EXPECT_DOUBLE_EQ(c["pass_cost_relative"][0].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(c["pass_cost_relative_min"][0].get<double>(), 1.0);
  for (size_t i = 0; i < 5; ++i) EXPECT_LE(c["pass_ms_min"][i].get<double>(), c["pass_ms_median"][i].get<double>());
}

TEST(RowsCurveCli, RefusesCountsOutsideTheRange) {
  for (const char* bad : {"0", "65", "2,-1"}) {
    test::expect_one_line_error(run_cli({"bench", "generate", "--probe-mib", "0", "--rows-curve", bad}),
                                "--rows-curve takes row counts 1..64");
  }
}

}  // namespace
}  // namespace nanoinfer
