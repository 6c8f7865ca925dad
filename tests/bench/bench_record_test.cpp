#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include <cstring>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>
#include <sstream>

#include "bench/bench_record.h"
#include "nanoinfer/error.h"
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
  EXPECT_EQ(message([&] { check_bench_results_path(missing); }),
            (dir / "nested/bench").string() +
                ": no such directory for the bench record (create it or pass -o FILE)");
  EXPECT_EQ(message([&] { append_bench_record({{"bench", "a"}}, missing); }),
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
    const std::string command = std::string("'") + NANOINFER_CMAKE_COMMAND + "' -DSRC='" + repo.string() +
                                "' -DOUT='" + out.string() + "' -P '" NANOINFER_SOURCE_DIR "/cmake/build_commit.cmake'";
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
    return "// Generated by cmake/build_commit.cmake at build time, not in the tree.\n#define NANOINFER_BUILD_COMMIT \"" +
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

}  // namespace
}  // namespace nanoinfer::bench
