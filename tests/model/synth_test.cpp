// synth_model_dir when something fails part-way: it removes the files and directories it
// created and nothing else. Failures are injected through the progress callback, which runs
// between chunks of the weights file: throwing there stands in for a write that fails (disk
// full, I/O error) midway, and removing a source file there makes the copy that follows the
// committed weights fail.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "nanoinfer/error.h"
#include "nanoinfer/synth.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Every entry under `dir`, relative to it, sorted.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(fs::relative(e.path(), dir).string());
  std::sort(names.begin(), names.end());
  return names;
}

class SynthModelDir : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "src");
    test::write_text(dir_ / "src/config.json", test::small_qwen2_config_json());
    test::write_text(dir_ / "src/generation_config.json", R"({"eos_token_id": 3})");
  }
  test::TempDir dir_;
};

TEST_F(SynthModelDir, WritesTheDirectoryWithItsParents) {
  const uint64_t bytes = synth_model_dir(dir_ / "src/config.json", dir_ / "a/b/out", {});
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(listing(dir_ / "a"), (std::vector<std::string>{"b", "b/out", "b/out/config.json",
                                                           "b/out/generation_config.json", "b/out/model.safetensors"}));
}

TEST_F(SynthModelDir, WriteFailingMidwayLeavesNoDirectory) {
  int calls = 0;
  const auto fail_halfway = [&](uint64_t done, uint64_t total) {
    ++calls;
    if (done * 2 >= total) fail("injected write failure");
  };
  EXPECT_THROW(synth_model_dir(dir_ / "src/config.json", dir_ / "a/b/out", {}, fail_halfway), Error);
  EXPECT_GT(calls, 1);  // the weights file was part-written when it failed
  EXPECT_FALSE(fs::exists(dir_ / "a"));
  EXPECT_EQ(listing(dir_.path()), (std::vector<std::string>{"src", "src/config.json", "src/generation_config.json"}));
}

TEST_F(SynthModelDir, CopyFailingAfterTheWeightsRemovesThemAndTheDirectory) {
  // At the last chunk the weights are complete (committed next); the copy of the removed
  // generation_config.json then fails, after model.safetensors and config.json are in place.
  const auto remove_source = [&](uint64_t done, uint64_t total) {
    if (done == total) fs::remove(dir_ / "src/generation_config.json");
  };
  try {
    synth_model_dir(dir_ / "src/config.json", dir_ / "out", {}, remove_source);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: not found"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

// A model directory already at --out keeps its weights: a non-empty directory, a file or a link
// is refused before anything is written.
TEST_F(SynthModelDir, NonEmptyOutIsRefusedAndLeftAsItWas) {
  fs::create_directories(dir_ / "out");
  test::write_text(dir_ / "out/notes.txt", "mine");
  test::write_text(dir_ / "out/model.safetensors", "the previous weights");
  int calls = 0;
  const auto count = [&](uint64_t, uint64_t) { ++calls; };
  EXPECT_THAT([&] { synth_model_dir(dir_ / "src/config.json", dir_ / "out", {}, count); },
              ThrowsMessage<Error>(HasSubstr("out: already exists and is not empty")));
  EXPECT_EQ(calls, 0);  // refused before the first byte
  EXPECT_EQ(listing(dir_ / "out"), (std::vector<std::string>{"model.safetensors", "notes.txt"}));
  EXPECT_EQ(test::read_text(dir_ / "out/model.safetensors"), "the previous weights");
}

// A link planted inside --out cannot redirect a write: the directory is not empty.
TEST_F(SynthModelDir, OutHoldingOnlyASymlinkIsRefused) {
  fs::create_directories(dir_ / "out");
  test::write_text(dir_ / "victim", "precious");
  fs::create_symlink(dir_ / "victim", dir_ / "out/config.json");
  EXPECT_THROW(synth_model_dir(dir_ / "src/config.json", dir_ / "out", {}), Error);
  EXPECT_EQ(test::read_text(dir_ / "victim"), "precious");
}

TEST_F(SynthModelDir, OutThatIsAFileOrALinkIsRefused) {
  test::write_text(dir_ / "file", "precious");
  EXPECT_THAT([&] { synth_model_dir(dir_ / "src/config.json", dir_ / "file", {}); },
              ThrowsMessage<Error>(HasSubstr("file: is a regular file; synth writes a new model directory")));
  fs::create_directories(dir_ / "empty");
  fs::create_directory_symlink(dir_ / "empty", dir_ / "link");
  EXPECT_THAT([&] { synth_model_dir(dir_ / "src/config.json", dir_ / "link", {}); },
              ThrowsMessage<Error>(HasSubstr("link: is a symbolic link")));
  EXPECT_TRUE(fs::is_empty(dir_ / "empty"));
  EXPECT_EQ(test::read_text(dir_ / "file"), "precious");
}

TEST_F(SynthModelDir, AnEmptyDirectoryIsUsedAndKeptOnFailure) {
  fs::create_directories(dir_ / "out");
  synth_model_dir(dir_ / "src/config.json", dir_ / "out", {});
  EXPECT_EQ(listing(dir_ / "out"),
            (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors"}));
  fs::create_directories(dir_ / "out2");
  const auto fail_halfway = [](uint64_t done, uint64_t total) {
    if (done * 2 >= total) fail("injected write failure");
  };
  EXPECT_THROW(synth_model_dir(dir_ / "src/config.json", dir_ / "out2", {}, fail_halfway), Error);
  EXPECT_TRUE(fs::is_directory(dir_ / "out2"));
  EXPECT_TRUE(fs::is_empty(dir_ / "out2"));
}

}  // namespace
}  // namespace nanoinfer
