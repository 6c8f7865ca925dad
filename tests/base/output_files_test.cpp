// Large outputs: the free-space check before the first byte, and temporary files removed when
// SIGINT/SIGTERM ends the process part way (a signal does not unwind, so RAII cannot do it).
#include "base/output_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <functional>

#include "io/atomic_file.h"
#include "io/safetensors_writer.h"
#include "nanoinfer/atomic_write.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/interrupt.h"
#include "support/checks.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

using test::error_of;

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

using test::in_child;

std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename());
  return names;
}

TEST(FreeSpace, EnoughPassesTooMuchNamesBothSizes) {
  test::TempDir dir;
  EXPECT_EQ(error_of([&] { require_free_space(dir / "not/yet/there.bin", 4096, "x"); }), "");
  EXPECT_THAT(
      error_of([&] { require_free_space(dir / "not/yet/there.bin", uint64_t{1} << 62, "out.bin"); }),
      MatchesRegex("out\\.bin: needs 4\\.0 EiB but only .* are free on the file system of " + dir.path().string()));
}

TEST(RemoveOnSignal, SigintAndSigtermRemoveRegisteredFilesAndStillEndTheProcess) {
  test::TempDir dir;
  for (const int sig : {SIGINT, SIGTERM}) {
    const auto path = dir / "partial.tmp";
    test::write_text(path, "half");
    const int status = in_child([&] {
      RemoveOnSignal guard(path);
      ::raise(sig);
      ::_exit(7);  // not reached: the signal ends the process after the cleanup
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_FALSE(std::filesystem::exists(path));
  }
}

TEST(RemoveOnSignal, ReleasedOrOutOfScopePathsAreLeftAlone) {
  test::TempDir dir;
  const auto kept = dir / "kept";
  const auto scoped = dir / "scoped";
  const auto removed = dir / "removed";
  for (const auto& p : {kept, scoped, removed}) test::write_text(p, "x");
  const int status = in_child([&] {
    RemoveOnSignal a(kept);
    a.release();
    { RemoveOnSignal b(scoped); }
    RemoveOnSignal c(removed);
    ::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(std::filesystem::exists(kept));
  EXPECT_TRUE(std::filesystem::exists(scoped));
  EXPECT_FALSE(std::filesystem::exists(removed));
}

// A registered directory goes with everything in it, subdirectories included; SIGHUP counts.
TEST(RemoveOnSignal, DirectoriesAreRemovedWithTheirContents) {
  test::TempDir dir;
  const auto staged = dir / "staging";
  std::filesystem::create_directories(staged / "a/b");
  test::write_text(staged / "model.safetensors", "half");
  test::write_text(staged / "a/b/deep", "x");
  test::write_text(dir / "beside", "kept");
  const int status = in_child([&] {
    RemoveOnSignal guard(staged, RemoveOnSignal::Kind::Directory);
    ::raise(SIGHUP);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGHUP);
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"beside"});
}

// ScratchDir registers itself: the hidden directory an output is built in does not outlive a
// signal (SIGHUP included).
TEST(RemoveOnSignal, ScratchDirIsRemovedOnASignal) {
  test::TempDir dir;
  const int status = in_child([&] {
    const ScratchDir scratch = ScratchDir::beside(dir / "out");
    test::write_text(scratch.path() / "model.safetensors", "half");
    ::raise(SIGHUP);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{});
}

// In an InterruptScope the first signal is recorded, not fatal; the second cleans up and ends
// the process; outside one the first does.
TEST(InterruptScope, FirstSignalRecordedSecondRemovesAndEnds) {
  test::TempDir dir;
  const auto path = dir / "partial.tmp";
  test::write_text(path, "half");
  const int status = in_child([&] {
    RemoveOnSignal guard(path);
    const InterruptScope scope;
    if (InterruptScope::interrupted() != 0) ::_exit(2);
    ::raise(SIGTERM);
    if (InterruptScope::interrupted() != SIGTERM || !std::filesystem::exists(path)) ::_exit(3);
    ::raise(SIGINT);
    ::_exit(4);  // not reached
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsWriterSignals, SigtermDuringWriteLeavesNoTemporaryFile) {
  test::TempDir dir;
  const auto file = dir / "model.safetensors";
  const int status = in_child([&] {
    SafetensorsWriter writer(file);
    writer.add("t", DType::F32, {1 << 22}, [](std::span<std::byte> chunk) {
      std::fill(chunk.begin(), chunk.end(), std::byte{1});
      ::raise(SIGTERM);  // the temporary file exists and holds the header by now
    });
    writer.write();
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{});
}

TEST(SafetensorsWriterSignals, TooLargeForTheDiskFailsBeforeWritingAnything) {
  test::TempDir dir;
  const auto file = dir / "model.safetensors";
  SafetensorsWriter writer(file);
  bool filled = false;
  writer.add("huge", DType::F32, {uint64_t{1} << 40, 1 << 10}, [&](std::span<std::byte>) { filled = true; });
  EXPECT_THAT(error_of([&] { writer.write(); }), HasSubstr(file.string() + ": needs 4.0 PiB but only "));
  EXPECT_FALSE(filled);
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{});
}

TEST(SafetensorsWriterSignals, TotalSizeOverflowIsRejected) {
  SafetensorsWriter writer("x.safetensors");
  writer.add("a", DType::U8, {uint64_t{1} << 63}, [](std::span<std::byte>) {});
  EXPECT_EQ(error_of([&] { writer.add("b", DType::U8, {uint64_t{1} << 63}, [](std::span<std::byte>) {}); }),
            "x.safetensors: tensor 'b': the file's size overflows 64 bits");
}

// The attack on a writer that writes to the predictable "<target>.tmp<pid>" through a stream
// that follows links: a link planted there sends the page into any file the user can write.
// Links planted at that name, and at a stale-looking temporary name of our own
// naming (a dead process's, which the writer tidies), are neither followed nor written
// through: the victims keep their bytes, the target gets the data.
TEST(AtomicFile, LinksPlantedAtTemporaryNamesAreNeverFollowed) {
  namespace fs = std::filesystem;
  test::TempDir dir;
  test::TempDir victims;
  test::write_text(victims / "file", "victim");
  fs::create_directory(victims / "dir");
  test::write_text(victims / "dir" / "inside", "victim");
  const fs::path target = dir / "page.html";
  const fs::path old_name = dir / ("page.html.tmp" + std::to_string(::getpid()));
  fs::create_symlink(victims / "file", old_name);
  // pid 2^22+1 is above Linux's pid_max limit, so no process has it: the name is stale.
  const fs::path stale = dir / ".page.html.tmp.4194305.AbCdEf";
  fs::create_symlink(victims / "dir", stale);

  write_file_atomically(target, "the page");

  EXPECT_EQ(test::read_text(target), "the page");
  EXPECT_FALSE(fs::is_symlink(target));
  EXPECT_EQ(test::read_text(victims / "file"), "victim");
  EXPECT_EQ(test::read_text(victims / "dir" / "inside"), "victim");
  EXPECT_TRUE(fs::is_symlink(old_name));                // not ours: left alone
  EXPECT_FALSE(fs::exists(fs::symlink_status(stale)));  // ours, stale: the link removed, not its target
  EXPECT_EQ(names_in(victims.path()).size(), 2u);
}

// write_file_atomically's temporary file while the bytes go in: SIGINT, SIGTERM and SIGHUP
// each remove it and still end the process by that signal; the target never appears.
TEST(AtomicFile, EachSignalDuringAWriteLeavesNoTemporaryFile) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    test::TempDir dir;
    const auto target = dir / "page.html";
    const int status = in_child([&] {
      AtomicFile file(target);
      file.write_all("part of the page", 16);
      if (names_in(dir.path()).size() != 1) ::_exit(3);  // the temporary file exists by now
      ::raise(sig);
      ::_exit(4);
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << sig << ", exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{}) << "signal " << sig;
  }
}

}  // namespace
}  // namespace nanoinfer
