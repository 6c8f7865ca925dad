// Reading user-named files: the type check before open (a FIFO must not block, /dev/zero and
// directories are refused by name), the caps on what is read, and the line reader.
#include "nanoinfer/file_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "io/safetensors.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_config.h"
#include "nanoinfer/tokenizer.h"
#include "support/checks.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

using test::error_of;

using ::testing::HasSubstr;

TEST(ReadFile, ReadsARegularFileWithinTheCap) {
  test::TempDir dir;
  const std::string text(200000, 'x');  // spans several internal reads
  test::write_text(dir / "f", text);
  EXPECT_EQ(read_file(dir / "f", text.size()), text);
  test::write_text(dir / "empty", "");
  EXPECT_EQ(read_file(dir / "empty", 0), "");
}

TEST(ReadFile, RefusesWhatIsNotARegularFileByName) {
  test::TempDir dir;
  const std::string p = (dir / "x").string();
  EXPECT_EQ(error_of([&] { read_file(p, 100); }), p + ": not found");
  EXPECT_EQ(error_of([&] { read_file(dir / "x/y", 100); }), p + "/y: not found");
  EXPECT_EQ(error_of([&] { read_file(dir.path(), 100); }), dir.path().string() + ": is a directory, not a file");
  EXPECT_EQ(error_of([] { read_file("/dev/zero", 100); }), "/dev/zero: is a character device, not a regular file");
  // A FIFO with no writer: open() would block forever; the check comes first.
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_file(p, 100); }), p + ": is a FIFO, not a regular file");
  EXPECT_EQ(error_of([&] { require_regular_file(p); }), p + ": is a FIFO, not a regular file");
  EXPECT_EQ(error_of([&] { SafetensorsFile::open(p); }), p + ": is a FIFO, not a regular file");
  EXPECT_EQ(error_of([&] { LineReader reader(p); }), p + ": is a FIFO, not a regular file");
}

TEST(ReadFile, CapNamesTheFileAndTheLimit) {
  test::TempDir dir;
  test::write_text(dir / "f", std::string(101, 'x'));
  EXPECT_EQ(error_of([&] { read_file(dir / "f", 100); }),
            (dir / "f").string() + ": too large to read into memory (101 bytes; the limit is 100 bytes)");
  EXPECT_EQ(read_file(dir / "f", 101).size(), 101u);
}

TEST(ReadAll, ReadsAPipeToTheEndAndCapsIt) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([&] {
    const std::string chunk(1000, 'p');
    for (int i = 0; i < 300; ++i) (void)!::write(fds[1], chunk.data(), chunk.size());
    ::close(fds[1]);
  });
  EXPECT_EQ(read_all(fds[0], "<pipe>", 300000).size(), 300000u);
  writer.join();
  ::close(fds[0]);

  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer2([&] {
    const std::string chunk(1000, 'p');
    for (int i = 0; i < 300; ++i) {
      if (::write(fds[1], chunk.data(), chunk.size()) < 0) break;  // reader gave up
    }
    ::close(fds[1]);
  });
  EXPECT_THAT(error_of([&] { read_all(fds[0], "<pipe>", 299999); }),
              HasSubstr("<pipe>: too large to read into memory"));
  ::close(fds[0]);
  writer2.join();
}

TEST(PathExists, FalseOnlyWhenNothingIsThere) {
  test::TempDir dir;
  EXPECT_FALSE(path_exists(dir / "nothing"));
  test::write_text(dir / "file", "x");
  EXPECT_FALSE(path_exists(dir / "file/below"));  // ENOTDIR
  EXPECT_TRUE(path_exists(dir / "file"));
  EXPECT_TRUE(path_exists(dir.path()));
}

TEST(LineReader, SplitsLinesCountsThemAndCapsTheirLength) {
  test::TempDir dir;
  const std::string long_line(100000, 'l');  // longer than one internal read
  test::write_text(dir / "f", "a\n\n" + long_line + "\nlast");
  LineReader reader((dir / "f").string());
  std::string line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "a");
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "");
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, long_line);
  EXPECT_EQ(reader.line_number(), 3u);
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "last");
  EXPECT_FALSE(reader.next(line));
  EXPECT_FALSE(reader.next(line));

  LineReader capped((dir / "f").string(), 99999);
  ASSERT_TRUE(capped.next(line));
  ASSERT_TRUE(capped.next(line));
  EXPECT_EQ(error_of([&] { capped.next(line); }),
            (dir / "f").string() + " line 3: longer than the 99999 byte limit for one line");
  LineReader exact((dir / "f").string(), 100000);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(exact.next(line));
}

TEST(GenerationConfigLoad, PresentButUnreadableIsAnErrorNotAbsent) {
  test::TempDir dir;
  std::filesystem::create_directory(dir / "generation_config.json");
  EXPECT_THAT(error_of([&] { GenerationConfig::load_from_dir(dir.path()); }),
              HasSubstr("generation_config.json: is a directory, not a file"));
  std::filesystem::remove(dir / "generation_config.json");
  test::write_text(dir / "generation_config.json", "{\"eos_token_id\": ");
  EXPECT_THAT(error_of([&] { GenerationConfig::load_from_dir(dir.path()); }),
              HasSubstr("generation_config.json: not valid JSON"));
}

TEST(TokenizerLoad, MissingAndNonRegularFilesAreNamed) {
  test::TempDir dir;
  EXPECT_EQ(error_of([&] { Tokenizer::load(dir.path()); }), (dir / "tokenizer.json").string() + ": not found");
  std::filesystem::create_directory(dir / "tokenizer.json");
  EXPECT_EQ(error_of([&] { Tokenizer::load(dir.path()); }),
            (dir / "tokenizer.json").string() + ": is a directory, not a file");
}

}  // namespace
}  // namespace nanoinfer
