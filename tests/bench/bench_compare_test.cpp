// bench compare on crafted records: which records are comparable, the ratios, the noise and
// the verdicts, exactly; bench discard's rewrite.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_compare.h"
#include "nanoinfer/error.h"
#include "support/checks.h"
#include "support/files.h"

namespace nanoinfer::bench {
namespace {

using nlohmann::json;

// A `bench generate` decode row of one machine and test, with its samples.
json generate_row(double median, std::vector<double> samples, std::string run = "r") {
  return {{"bench", "generate"}, {"cpu", "AMD EPYC"},     {"isa", "avx512-bf16"},
          {"threads", 2},        {"model_filename", "m"}, {"dtype", "int4"},
          {"type_k", "f16"},     {"n_prompt", 0},         {"n_gen", 32},
          {"n_depth", 64},       {"median_ts", median},   {"samples_ts", samples},
          {"run", run}};
}

TEST(BenchCompare, RatiosToBestAndLastAndAVerdictBeyondTheSpread) {
  const std::vector<json> history = {generate_row(100, {98, 100, 102}), generate_row(110, {108, 110, 111}),
                                     generate_row(105, {104, 105, 106})};
  // 100 against the last (105, spread 2/105) and itself (spread 4/100): noise 4%, ratio 0.952.
  const auto slow = compare_records(history, {generate_row(100, {98, 100, 102})});
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].figure, "median_ts");
  EXPECT_EQ(slow[0].earlier, 3u);
  EXPECT_DOUBLE_EQ(slow[0].best, 110);
  EXPECT_DOUBLE_EQ(slow[0].last, 105);
  EXPECT_DOUBLE_EQ(slow[0].ratio_best, 100.0 / 110);
  EXPECT_DOUBLE_EQ(slow[0].ratio_last, 100.0 / 105);
  EXPECT_DOUBLE_EQ(slow[0].noise, 0.04);
  EXPECT_TRUE(slow[0].regression);  // 0.952 < 0.96
  // The same median with a wider scatter (10%) is within the noise.
  const auto noisy = compare_records(history, {generate_row(100, {95, 100, 105})});
  EXPECT_DOUBLE_EQ(noisy[0].noise, 0.10);
  EXPECT_FALSE(noisy[0].regression);
  // Faster than the last: ratios above 1, no regression.
  const auto fast = compare_records(history, {generate_row(115, {115})});
  EXPECT_DOUBLE_EQ(fast[0].ratio_last, 115.0 / 105);
  EXPECT_FALSE(fast[0].regression);
}

TEST(BenchCompare, SingleSampleRecordsGetTheMinimumNoise) {
  const std::vector<json> history = {generate_row(100, {100})};
  EXPECT_FALSE(compare_records(history, {generate_row(97.5, {97.5})})[0].regression);  // 0.975 >= 0.97
  EXPECT_TRUE(compare_records(history, {generate_row(96.5, {96.5})})[0].regression);
  EXPECT_FALSE(compare_records(history, {generate_row(96.5, {96.5})}, {.min_noise = 0.05})[0].regression);
}

TEST(BenchCompare, OnlyTheSameMachineAndTestAndNothingDiscarded) {
  json other_isa = generate_row(200, {200});
  other_isa["isa"] = "avx2";
  json other_threads = generate_row(200, {200});
  other_threads["threads"] = 1;
  json other_cpu = generate_row(200, {200});
  other_cpu["cpu"] = "Intel Xeon";
  json other_shape = generate_row(200, {200});
  other_shape["n_gen"] = 64;
  json no_dtype = generate_row(200, {200});
  no_dtype.erase("dtype");
  json thrown_out = generate_row(200, {200});
  thrown_out["discarded"] = "host busy";
  json other_bench = generate_row(200, {200});
  other_bench["bench"] = "generate-cache-ab";
  const std::vector<json> history = {
      generate_row(100, {100}), other_isa, other_threads, other_cpu, other_shape, no_dtype, thrown_out, other_bench};
  const auto v = compare_records(history, {generate_row(100, {100})});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].earlier, 1u);
  EXPECT_DOUBLE_EQ(v[0].best, 100);
  EXPECT_FALSE(v[0].regression);
  // A candidate with no comparable record has no baseline; a discarded candidate is skipped.
  json lonely = generate_row(50, {50});
  lonely["threads"] = 7;
  const auto n = compare_records(history, {lonely, thrown_out});
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].earlier, 0u);
  EXPECT_FALSE(n[0].regression);
  EXPECT_NE(format_verdicts(n).find("new (no earlier record"), std::string::npos);
}

// serve-bench rows compare only with rows of the same served model (and load).
TEST(BenchCompare, ServeRowsOfAnotherModelAreNotComparable) {
  auto serve = [](std::string model, double tps) {
    return json{{"bench", "serve"}, {"cpu", "c"},         {"isa", "avx512-bf16"}, {"threads", 2},
                {"model", model},   {"prompt", "ROMEO:"}, {"clients", 1},         {"requests", 4},
                {"max_tokens", 64}, {"tokens_per_s", tps}};
  };
  const std::vector<json> history = {serve("default-model", 4800), serve("synth-int8.gguf", 90)};
  const auto v = compare_records(history, {serve("synth-int8.gguf", 89)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].earlier, 1u);
  EXPECT_DOUBLE_EQ(v[0].best, 90);
  EXPECT_FALSE(v[0].regression);
  EXPECT_TRUE(compare_records(history, {serve("synth-int8.gguf", 80)})[0].regression);
  // serve-itl: the gap while a long prompt prefills, and its ratio to the gap before, lower is better.
  auto itl = [](std::string model, double during, double ratio) {
    return json{{"bench", "serve-itl"}, {"cpu", "c"},   {"isa", "avx512-bf16"}, {"threads", 2},
                {"model", model},       {"streams", 4}, {"long_tokens", 16384}, {"during_median_s", during},
                {"ratio_median", ratio}};
  };
  const std::vector<json> itl_history = {itl("a.gguf", 0.080, 2.8), itl("b.gguf", 0.010, 1.1)};
  const auto worse = compare_records(itl_history, {itl("a.gguf", 0.090, 3.1)});
  ASSERT_EQ(worse.size(), 2u);
  EXPECT_EQ(worse[0].earlier, 1u);
  EXPECT_TRUE(worse[0].regression);
  EXPECT_TRUE(worse[1].regression);
  const auto better = compare_records(itl_history, {itl("a.gguf", 0.060, 2.0)});
  EXPECT_FALSE(better[0].regression);
  EXPECT_FALSE(better[1].regression);
}

TEST(BenchCompare, LowerIsBetterFiguresAndMinMaxSpreads) {
  auto load = [](double median, double min) {
    return json{{"bench", "load"},
                {"cpu", "c"},
                {"isa", "scalar"},
                {"threads", 1},
                {"model", "m"},
                {"weight_type", "bf16"},
                {"load_seconds_median", median},
                {"load_seconds_min", min}};
  };
  // Twice as slow to load: speed ratio 0.5, noise from the min fields (0.2 / 2 = 10%).
  const auto v = compare_records({load(1.0, 0.9), load(0.8, 0.8)}, {load(2.0, 1.8)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_DOUBLE_EQ(v[0].best, 0.8);
  EXPECT_DOUBLE_EQ(v[0].last, 0.8);
  EXPECT_DOUBLE_EQ(v[0].ratio_best, 0.4);
  EXPECT_NEAR(v[0].noise, 0.1, 1e-12);
  EXPECT_TRUE(v[0].regression);
  EXPECT_NE(format_verdicts(v).find("REGRESSION"), std::string::npos);
  EXPECT_NE(format_verdicts(v).find("1 regression(s)"), std::string::npos);
}

TEST(BenchCompare, TheLastRunIsTheTrailingRecordsOfOneRunId) {
  const std::vector<json> records = {generate_row(1, {1}, "a"), generate_row(2, {2}, "b"), generate_row(3, {3}, "c"),
                                     generate_row(4, {4}, "c")};
  const auto [history, run] = split_last_run(records);
  ASSERT_EQ(history.size(), 2u);
  ASSERT_EQ(run.size(), 2u);
  EXPECT_EQ(run[0]["median_ts"], 3);
  json no_run = generate_row(5, {5});
  no_run.erase("run");
  std::vector<json> legacy = records;
  legacy.push_back(no_run);
  EXPECT_EQ(split_last_run(legacy).second.size(), 1u);
  EXPECT_TRUE(split_last_run({}).second.empty());
}

TEST(BenchCompare, DiscardRewritesTheNamedLinesOnly) {
  test::TempDir dir;
  const auto file = (dir / "r.jsonl").string();
  test::write_text(file, generate_row(1, {1}).dump() + "\n" + generate_row(2, {2}).dump() + "\n");
  discard_bench_records(file, {2}, "host busy");
  const auto records = read_bench_records(file);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].contains("discarded"));
  EXPECT_EQ(records[1]["discarded"], "host busy");
  EXPECT_EQ(records[1]["median_ts"], 2);
  const auto message = [](auto&& fn) { return test::error_of(fn); };
  EXPECT_EQ(message([&] { discard_bench_records(file, {3}, "x"); }), file + ": no line 3 (the file has 2 lines)");
  EXPECT_EQ(message([&] { discard_bench_records(file, {2}, "again"); }),
            file + ":2: already discarded (\"host busy\")");
  EXPECT_EQ(message([&] { discard_bench_records(file, {1}, " "); }), "bench discard: --reason must say why");
  test::write_text(file, "{\"bench\":\"generate\"}\n[1]\n");
  EXPECT_EQ(message([&] { read_bench_records(file); }), file + ":2: not a JSON object (one bench record per line)");
  EXPECT_EQ(message([&] { read_bench_records((dir / "none.jsonl").string()); }),
            (dir / "none.jsonl").string() + ": not found");
}

// The records bench compare reads are streamed: the verdicts are exactly those of the records
// held all at once (compare_records over split_last_run), while only the newest run (plus the
// record being read) is ever held. The file mixes runs, records without a run, discarded
// records, other machines, tests and kinds, and lines that are blank.
TEST(BenchCompare, StreamedFileGivesTheSameVerdictsHoldingOnlyTheNewestRun) {
  test::TempDir dir;
  const auto file = (dir / "r.jsonl").string();
  std::string text;
  size_t records = 0;
  for (int i = 0; i < 3000; ++i) {
    json r = generate_row(90 + i % 23, {88.0 + i % 23, 90.0 + i % 23, 91.0 + i % 19}, "run" + std::to_string(i / 5));
    if (i % 7 == 0) r.erase("run");
    if (i % 11 == 0) r["threads"] = 1 + i % 3;
    if (i % 13 == 0) r["n_gen"] = 64;
    if (i % 17 == 0) r["discarded"] = "host busy";
    if (i % 29 == 0) r["bench"] = "generate-cache-ab";
    if (i % 31 == 0)
      r = json{{"bench", "load"},
               {"cpu", "AMD EPYC"},
               {"isa", "avx512-bf16"},
               {"threads", 2},
               {"model", "m"},
               {"weight_type", "bf16"},
               {"load_seconds_median", 1.0 + i % 5 * 0.1},
               {"run", "run" + std::to_string(i / 5)}};
    text += r.dump() + (i % 100 == 0 ? "\n\n" : "\n");
    ++records;
  }
  // The newest run: four records of one run id, of two kinds and two thread counts.
  for (int i = 0; i < 4; ++i) {
    json r =
        i == 3
            ? json{{"bench", "load"}, {"cpu", "AMD EPYC"},     {"isa", "avx512-bf16"},       {"threads", 2},
                   {"model", "m"},    {"weight_type", "bf16"}, {"load_seconds_median", 1.3}, {"load_seconds_min", 1.2}}
            : generate_row(95 + i, {94.0 + i, 96.0 + i}, "newest");
    if (i == 1) r["threads"] = 2;
    if (i == 2) r["threads"] = 3;
    r["run"] = "newest";
    text += r.dump() + "\n";
    ++records;
  }
  test::write_text(file, text);

  const auto [history, run] = split_last_run(read_bench_records(file));
  ASSERT_EQ(history.size() + run.size(), records);
  ASSERT_EQ(run.size(), 4u);
  const std::vector<FigureVerdict> want = compare_records(history, run);
  const CompareReading got = compare_results_file(file, "");
  EXPECT_EQ(got.candidates, 4u);
  ASSERT_EQ(got.verdicts.size(), want.size());
  size_t with_baseline = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const FigureVerdict &a = got.verdicts[i], &b = want[i];
    EXPECT_EQ(a.bench, b.bench);
    EXPECT_EQ(a.test, b.test);
    EXPECT_EQ(a.figure, b.figure);
    EXPECT_EQ(a.earlier, b.earlier) << i;
    EXPECT_EQ(a.best, b.best) << i;
    EXPECT_EQ(a.last, b.last) << i;
    EXPECT_EQ(a.ratio_best, b.ratio_best) << i;
    EXPECT_EQ(a.ratio_last, b.ratio_last) << i;
    EXPECT_EQ(a.noise, b.noise) << i;
    EXPECT_EQ(a.regression, b.regression) << i;
    with_baseline += b.earlier > 0 ? 1 : 0;
  }
  EXPECT_GE(with_baseline, 2u) << "the test needs comparable history";
  EXPECT_EQ(format_verdicts(got.verdicts), format_verdicts(want));
  // Held at once: a run of at most five records (the history's) or the newest four, and the
  // record being read; never the file's 3,004.
  EXPECT_LE(got.peak_records_held, 6u);
  EXPECT_GE(got.peak_records_held, 5u);

  // --run: that file's records are the candidates, all of FILE is history.
  const auto run_file = (dir / "run.jsonl").string();
  test::write_text(run_file, run[0].dump() + "\n" + run[3].dump() + "\n");
  const CompareReading against = compare_results_file(file, run_file);
  const std::vector<FigureVerdict> all = compare_records(read_bench_records(file), {run[0], run[3]});
  ASSERT_EQ(against.verdicts.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(against.verdicts[i].earlier, all[i].earlier);
    EXPECT_EQ(against.verdicts[i].last, all[i].last);
    EXPECT_EQ(against.verdicts[i].noise, all[i].noise);
  }
  EXPECT_EQ(against.peak_records_held, 3u);
}

// A run too large to hold is refused by name, never held.
TEST(BenchCompare, ARunBeyondTheCapIsAnError) {
  test::TempDir dir;
  const auto file = (dir / "r.jsonl").string();
  std::string text;
  for (size_t i = 0; i <= kMaxRunRecords; ++i) text += generate_row(100, {100}, "one").dump() + "\n";
  test::write_text(file, text);
  EXPECT_EQ(test::error_of([&] { compare_results_file(file, ""); }),
            file + ": the run to compare holds more than 4096 records (bench compare holds one run in memory)");
}

// discard writes as every other writer of a whole file does: a symbolic link is refused, not
// replaced by a regular file (its target untouched), and the rewrite streams line by line.
TEST(BenchCompare, DiscardRefusesASymlinkAndKeepsItsTarget) {
  test::TempDir dir;
  const auto target = (dir / "r.jsonl").string();
  const std::string text = generate_row(1, {1}).dump() + "\n" + generate_row(2, {2}).dump() + "\n";
  test::write_text(target, text);
  std::filesystem::create_symlink(target, dir / "link.jsonl");
  const auto link = (dir / "link.jsonl").string();
  EXPECT_EQ(test::error_of([&] { discard_bench_records(link, {1}, "host busy"); }),
            link + ": is a symbolic link; refusing to replace it (name a regular file)");
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(test::read_text(target), text);
  EXPECT_EQ(test::entries(dir.path()), (std::vector<std::string>{"link.jsonl", "r.jsonl"}));
  // A line given twice, and a line past the end found only once the file is read: nothing is
  // written.
  EXPECT_EQ(test::error_of([&] { discard_bench_records(target, {2, 2}, "x"); }), target + ": line 2 is given twice");
  EXPECT_EQ(test::error_of([&] {
              discard_bench_records(target, {1, 9}, "x");
            }),
            target + ": no line 9 (the file has 2 lines)");
  EXPECT_EQ(test::read_text(target), text);
  EXPECT_EQ(test::entries(dir.path()), (std::vector<std::string>{"link.jsonl", "r.jsonl"}));
}

}  // namespace
}  // namespace nanoinfer::bench
