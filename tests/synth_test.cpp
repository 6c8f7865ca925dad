// synth_model_dir when something fails part-way: it removes the files and directories it
// created and nothing else. Failures are injected through the progress callback, which runs
// between chunks of the weights file: throwing there stands in for a write that fails (disk
// full, I/O error) midway, and removing a source file there makes the copy that follows the
// committed weights fail.
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

// Every entry under `dir`, relative to it, sorted.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    names.push_back(fs::relative(e.path(), dir).string());
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
  EXPECT_EQ(listing(dir_ / "a"),
            (std::vector<std::string>{"b", "b/out", "b/out/config.json",
                                      "b/out/generation_config.json", "b/out/model.safetensors"}));
}

TEST_F(SynthModelDir, WriteFailingMidwayLeavesNoDirectory) {
  int calls = 0;
  const auto fail_halfway = [&](uint64_t done, uint64_t total) {
    ++calls;
    if (done * 2 >= total) fail("injected write failure");
  };
  EXPECT_THROW(synth_model_dir(dir_ / "src/config.json", dir_ / "a/b/out", {}, fail_halfway),
               Error);
  EXPECT_GT(calls, 1);  // the weights file was part-written when it failed
  EXPECT_FALSE(fs::exists(dir_ / "a"));
  EXPECT_EQ(listing(dir_.path()),
            (std::vector<std::string>{"src", "src/config.json", "src/generation_config.json"}));
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
    EXPECT_NE(std::string(e.what()).find("generation_config.json: cannot copy to"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(SynthModelDir, FailureInAnExistingDirectoryKeepsWhatWasThere) {
  fs::create_directories(dir_ / "out");
  test::write_text(dir_ / "out/notes.txt", "mine");
  test::write_text(dir_ / "out/model.safetensors", "the previous weights");
  const auto fail_halfway = [](uint64_t done, uint64_t total) {
    if (done * 2 >= total) fail("injected write failure");
  };
  EXPECT_THROW(synth_model_dir(dir_ / "src/config.json", dir_ / "out", {}, fail_halfway), Error);
  // The old weights are untouched (the new ones never replaced them), no temporary file is
  // left, and neither config was copied.
  EXPECT_EQ(listing(dir_ / "out"), (std::vector<std::string>{"model.safetensors", "notes.txt"}));
  EXPECT_EQ(test::read_text(dir_ / "out/model.safetensors"), "the previous weights");
  EXPECT_EQ(test::read_text(dir_ / "out/notes.txt"), "mine");
}

TEST_F(SynthModelDir, CopyFailureInAnExistingDirectoryRemovesOnlyNewFiles) {
  fs::create_directories(dir_ / "out");
  test::write_text(dir_ / "out/notes.txt", "mine");
  // Replaced by the copy; it existed before, so it stays.
  test::write_text(dir_ / "out/config.json", "{}");
  const auto remove_source = [&](uint64_t done, uint64_t total) {
    if (done == total) fs::remove(dir_ / "src/generation_config.json");
  };
  EXPECT_THROW(synth_model_dir(dir_ / "src/config.json", dir_ / "out", {}, remove_source), Error);
  EXPECT_EQ(listing(dir_ / "out"), (std::vector<std::string>{"config.json", "notes.txt"}));
}

}  // namespace
}  // namespace nanoinfer
