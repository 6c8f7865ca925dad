#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_quant.h"
#include "bench/bench_record.h"
#include "bench/bench_sampler.h"
#include "bench/bench_tune.h"
#include "nanoinfer/error.h"
#include "support/checks.h"
#include "support/files.h"

namespace nanoinfer::bench {
namespace {

TEST(BenchRecord, ContextCarriesEveryProvenanceField) {
  const auto ctx = bench_context(3, Isa::Avx2);
  std::vector<std::string> keys;
  for (const auto& [key, value] : ctx.items()) keys.push_back(key);
  std::vector<std::string> expected = provenance_fields();
  std::sort(keys.begin(), keys.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(keys, expected);  // no more, no fewer
  EXPECT_EQ(ctx.at("threads"), 3);
  EXPECT_EQ(ctx.at("isa"), "avx2");
  EXPECT_GE(ctx.at("logical_cores").get<int>(), 1);
  EXPECT_FALSE(ctx.at("cpu").get<std::string>().empty());
  // The flags are detection's: exactly the host features, in the table's spelling.
  std::vector<std::string> flags;
  for (size_t i = 0; i < kCpuFeatureCount; ++i) {
    const auto f = static_cast<CpuFeature>(i);
    if (host_cpu_features().has(f)) flags.emplace_back(cpu_feature_name(f));
  }
  EXPECT_EQ(ctx.at("cpu_flags").get<std::vector<std::string>>(), flags);
  // A short hash and whether the tree is dirty; outside a checkout (a source tarball), "unknown" and null.
  const std::string commit = ctx.at("commit");
  if (commit == "unknown") {
    EXPECT_TRUE(ctx.at("dirty").is_null());
  } else {
    EXPECT_TRUE(commit.size() >= 7 && commit.find_first_not_of("0123456789abcdef") == std::string::npos) << commit;
    EXPECT_TRUE(ctx.at("dirty").is_boolean());
  }
  EXPECT_EQ(ctx.at("nanoinfer_version"), NANOINFER_VERSION);
  const std::string ts = ctx.at("timestamp");
  ASSERT_EQ(ts.size(), 20u);  // 2026-01-02T03:04:05Z
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts.back(), 'Z');
  // The command line is this process's: the test binary's path comes first.
  const std::string line = ctx.at("command_line");
  EXPECT_NE(line.find("nanoinfer_tests"), std::string::npos) << line;
  EXPECT_EQ(bench_context(1, Isa::Scalar, "node x.mjs 'a b'").at("command_line"), "node x.mjs 'a b'");
  // One run id per process.
  EXPECT_EQ(bench_context(1, Isa::Scalar).at("run"), ctx.at("run"));
  EXPECT_FALSE(ctx.at("run").get<std::string>().empty());
}

TEST(BenchRecord, AppendsOneLinePerRecordAndNeverCreatesDirectories) {
  test::TempDir dir;
  EXPECT_THROW(check_bench_results_path(dir / "nested/bench/results.jsonl"), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "nested"));
  const auto file = dir / "results.jsonl";
  check_bench_results_path(file);
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

TEST(BenchRecord, MissingDirectoryOrNonRegularFileIsAnErrorAndNothingIsCreated) {
  test::TempDir dir;
  const auto missing = dir / "nested/bench/results.jsonl";
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(
      message([&] { check_bench_results_path(missing); }),
      (dir / "nested/bench").string() + ": no such directory for the bench record (create it or pass --results FILE)");
  EXPECT_EQ(message([&] {
              append_bench_record({{"bench", "a"}}, missing);
            }),
            message([&] { check_bench_results_path(missing); }));
  EXPECT_FALSE(std::filesystem::exists(dir / "nested"));
  EXPECT_EQ(message([&] { check_bench_results_path(dir.path()); }),
            dir.path().string() + ": not a regular file; cannot append the bench record");
  EXPECT_EQ(message([&] { check_bench_results_path(dir / "new.jsonl"); }), "");
  EXPECT_FALSE(std::filesystem::exists(dir / "new.jsonl"));  // checking creates nothing
}

TEST(BenchRecord, FailedAppendLeavesNoHalfLine) {
  // A file size limit makes the write stop part way (then EFBIG), as a full disk would; it
  // applies to the whole process, so the append runs in a child.
  test::TempDir dir;
  const auto file = dir / "results.jsonl";
  test::write_text(file, "{\"bench\":\"earlier\"}\n");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{30, 30};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(3);
    try {
      append_bench_record({{"bench", "a long record that does not fit in the limit"}}, file);
    } catch (const Error& e) {
      ::_exit(std::string(e.what()) == file.string() + ": cannot append the bench record: File too large" ? 0 : 4);
    }
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(test::read_text(file), "{\"bench\":\"earlier\"}\n");  // truncated back
}

// cmake/build_commit.cmake, which every build runs: the header names the tree's commit and
// whether it had changes (records under bench/ excepted), and is not rewritten when nothing
// changed (so an unchanged build recompiles nothing).
TEST(BuildCommit, HeaderNamesTheCommitAndDirtyStateTheBuildSaw) {
  using test::read_text;
  using test::write_text;
  test::TempDir dir;
  const auto repo = dir / "repo";
  const auto out = dir / "build_commit.h";
  std::filesystem::create_directories(repo / "bench");
  const auto sh = [&](const std::string& command) {
    const std::string full = "cd '" + repo.string() + "' && " + command + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(full.c_str()), 0) << command;
  };
  const auto generate = [&] {
    const std::string command = std::string("'") + NANOINFER_CMAKE_COMMAND + "' -DSRC='" + repo.string() + "' -DOUT='" +
                                out.string() + "' -P '" NANOINFER_SOURCE_DIR "/cmake/build_commit.cmake'";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return read_text(out);
  };
  const auto head = [&] {
    const std::string file = (dir / "head").string();
    const std::string command = "cd '" + repo.string() + "' && git rev-parse --short HEAD > '" + file + "'";
    EXPECT_EQ(std::system(command.c_str()), 0);
    std::string h = read_text(file);
    while (!h.empty() && h.back() == '\n') h.pop_back();
    return h;
  };
  const auto header = [](const std::string& hash, int dirty) {
    return "// Generated by cmake/build_commit.cmake at build time, not in the tree.\n#define NANOINFER_BUILD_COMMIT "
           "\"" +
           hash + "\"\n#define NANOINFER_BUILD_DIRTY " + std::to_string(dirty) + "\n";
  };

  // Outside a checkout: no commit.
  EXPECT_EQ(generate(), header("", 0));

  sh("git init -q . && git config user.email t@t && git config user.name t");
  write_text(repo / "a.txt", "one");
  write_text(repo / "bench" / "r.jsonl", "{}\n");
  sh("git add -A && git commit -qm one");
  const std::string first = head();
  ASSERT_EQ(first.size() >= 7, true) << first;
  EXPECT_EQ(generate(), header(first, 0));
  const auto stamp = std::filesystem::last_write_time(out);

  // An appended record does not make the tree dirty, and an unchanged text is not rewritten.
  write_text(repo / "bench" / "r.jsonl", "{}\n{}\n");
  std::filesystem::last_write_time(out, stamp - std::chrono::seconds(10));
  const auto backdated = std::filesystem::last_write_time(out);
  EXPECT_EQ(generate(), header(first, 0));
  EXPECT_EQ(std::filesystem::last_write_time(out), backdated);

  // A changed source file is dirty; its commit is a new hash, clean again.
  write_text(repo / "a.txt", "two");
  EXPECT_EQ(generate(), header(first, 1));
  sh("git commit -qam two");
  const std::string second = head();
  EXPECT_NE(second, first);
  EXPECT_EQ(generate(), header(second, 0));
}

TEST(BenchRecord, PeakRssCoversTouchedMemory) {
  constexpr size_t kBytes = size_t{64} << 20;
  auto buf = std::make_unique<char[]>(kBytes);
  std::memset(buf.get(), 1, kBytes);
  volatile char sink = buf[kBytes / 2];
  (void)sink;
  EXPECT_GE(peak_rss_bytes(), kBytes);
}

// The measurements behind `bench quant`, `bench sampler` and `bench tune`, checked without
// timing anything: the level names, the sampler's inputs and records, the sign-test round count
// and the tune records' fields.

std::string level_error(const std::string& list) {
  return test::error_of([&] { parse_quant_levels(list); });
}

TEST(BenchQuantLevels, NamesSetTypeMethodHeadAndGroup) {
  const std::vector<QuantLevel> levels = parse_quant_levels("base,int8,int4-rtn:head=int4:group=128,int4-imatrix");
  ASSERT_EQ(levels.size(), 4u);
  EXPECT_TRUE(levels[0].base);
  EXPECT_FALSE(levels[1].base);
  EXPECT_EQ(levels[1].options.type, WeightType::Q8_0);
  EXPECT_FALSE(levels[1].options.method.has_value());  // quantize's default, gptq
  EXPECT_EQ(levels[2].name, "int4-rtn:head=int4:group=128");
  EXPECT_EQ(levels[2].options.type, WeightType::Q4_0);
  EXPECT_EQ(levels[2].options.method, QuantMethod::Rtn);
  EXPECT_EQ(levels[2].options.head_type, WeightType::Q4_0);
  EXPECT_EQ(levels[2].options.scale_group, 128u);
  EXPECT_EQ(levels[3].options.method, QuantMethod::Imatrix);
  EXPECT_EQ(levels[3].options.scale_group, 0u);
}

TEST(BenchQuantLevels, BadNamesAreErrorsNamingTheLevel) {
  EXPECT_NE(level_error("base,int5").find("--levels: 'int5' is not base or int8|int4"), std::string::npos);
  EXPECT_NE(level_error("base:head=int4").find("'base:head=int4' is not"), std::string::npos);
  EXPECT_NE(level_error("int4-rtn:group=100").find("the group must be a multiple of 32"), std::string::npos);
  EXPECT_NE(level_error("int4-gptq:group=64").find("groups beyond 32 are measured with -rtn"), std::string::npos);
  EXPECT_EQ(level_error(""), "--levels is empty");
}

TEST(BenchSampler, InputsAreFixedAndTheGreedyOpFindsEveryArgmax) {
  const SamplerInputs a = sampler_inputs(301), b = sampler_inputs(301);
  ASSERT_EQ(a.logits.size(), 8u);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.history, b.history);
  ASSERT_EQ(a.history.size(), 64u);
  for (int32_t id : a.history) EXPECT_LT(id, 301);
  for (size_t i = 0; i < a.logits.size(); ++i) {
    for (float x : a.logits[i]) EXPECT_LE(x, a.logits[i][static_cast<size_t>(a.top[i])]);
  }
  const std::span<const SamplerOp> ops = sampler_ops();
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_STREQ(ops[0].name, "argmax");
  // 8 calls cycle once through the vectors: the greedy checksum is the sum of their argmaxes.
  const SamplerMeasure m = measure_sampler_op(a, ops[0], 8, 2);
  uint64_t tops = 0;
  for (int32_t t : a.top) tops += static_cast<uint64_t>(t);
  EXPECT_EQ(m.checksum, 3 * tops);  // the warm-up and two timed runs
  EXPECT_EQ(m.ms.size(), 2u);
  EXPECT_EQ(m.history_tokens, 0u);
}

TEST(BenchSampler, RecordCarriesTheOpsSettingsAndTheProvenance) {
  const SamplerInputs in = sampler_inputs(50);
  const SamplerOp& chain = sampler_ops()[3];
  const SamplerMeasure m = measure_sampler_op(in, chain, 3, 1);
  EXPECT_EQ(m.history_tokens, 64u);
  const nlohmann::json r = sampler_record(chain, m, 50, 3, 1);
  for (const std::string& field : provenance_fields()) EXPECT_TRUE(r.contains(field)) << field;
  EXPECT_EQ(r["bench"], "sampler");
  EXPECT_EQ(r["op"], "chain");
  EXPECT_EQ(r["top_k"], 40);
  EXPECT_EQ(r["history_tokens"], 64);
  EXPECT_EQ(r["calls_per_run"], 3);
  EXPECT_EQ(r["token_checksum"], m.checksum);
  EXPECT_EQ(r["samples_ms"].size(), 1u);
}

TEST(BenchTune, RoundsToReachIsTheFirstCountWhoseSignTestPassesMaxP) {
  EXPECT_EQ(rounds_to_reach(0.01), 8);  // 2 / 2^8 = 0.0078; 2 / 2^7 = 0.0156
  EXPECT_EQ(rounds_to_reach(1.0), 1);
  for (double p : {0.5, 0.05, 0.001}) {
    const int n = rounds_to_reach(p);
    EXPECT_LE(sign_test_p(n, n), p);
    EXPECT_GT(sign_test_p(n - 1, n - 1), p);
  }
}

TEST(BenchTune, RecordNamesTheShapeTheBestCandidateAndTheSettings) {
  TunedShape t{.name = "qkv"};
  t.shape.rows = 512, t.shape.cols = 256, t.shape.prefill = true;
  t.candidates.resize(2);
  t.candidates[0].median_us = 4.0;
  t.candidates[1].median_us = 2.0, t.candidates[1].gain_median = 2.0, t.candidates[1].wins = 7;
  t.best = 1, t.kept = true;
  const TuneSettings settings{.prefill_tokens = 16, .rounds = 7};
  const nlohmann::json r = tune_record(t, "m", 2, Isa::Scalar, settings);
  EXPECT_EQ(r["bench"], "tune");
  EXPECT_EQ(r["model_filename"], "m");
  EXPECT_EQ(r["n_tokens"], 16);
  EXPECT_EQ(r["rows"], 512);
  EXPECT_EQ(r["candidates"].size(), 2u);
  EXPECT_EQ(r["default_median_us"], 4.0);
  EXPECT_EQ(r["best_median_us"], 2.0);
  EXPECT_EQ(r["gain_median"], 2.0);
  EXPECT_EQ(r["wins"], 7);
  EXPECT_EQ(r["kept"], true);
  EXPECT_EQ(r["threads"], 2);
}

}  // namespace
}  // namespace nanoinfer::bench
