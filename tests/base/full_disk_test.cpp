// `quantize` on a file system that fills up, for real: a small tmpfs mounted in a user and
// mount namespace of the test's own (unshare(1); skipped, with a line saying so, where
// unprivileged namespaces are not allowed). Two ways to run out: the free-space check before
// the weights (its message names --out, not the hidden staging directory) and the disk filling
// while tokenizer.json is copied after the weights (the message says the disk is full and names
// the file under --out). Either way nothing is left on the disk.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool namespaces_allowed() {
  return std::system("unshare --user --map-root-user --mount true >/dev/null 2>&1") == 0;
}

struct SmallDiskRun {
  int status = -1;
  std::string err;
  std::string left;  // `ls -A` of the mount point as the command ended (the tmpfs goes with it)
};

// `nanoinfer args...` with a fresh tmpfs of `bytes` mounted at `mount_point`.
SmallDiskRun run_on_small_disk(const fs::path& mount_point, uint64_t bytes, const fs::path& io,
                               const std::vector<std::string>& args) {
  const std::string script =
      "mount -t tmpfs -o size=\"$1\" tmpfs \"$2\" || exit 90; d=\"$2\"; io=\"$3\"; shift 3; "
      "\"$@\" 2>\"$io/err\"; echo $? >\"$io/status\"; ls -A \"$d\" >\"$io/left\"";
  std::string cmd = "unshare --user --map-root-user --mount sh -c " + quoted(script) + " sh " + std::to_string(bytes) +
                    " " + quoted(mount_point.string()) + " " + quoted(io.string()) + " " +
                    quoted(NANOINFER_BINARY_PATH);
  for (const std::string& a : args) cmd += " " + quoted(a);
  const int raw = std::system(cmd.c_str());
  SmallDiskRun r;
  if (!WIFEXITED(raw) || WEXITSTATUS(raw) != 0 || !fs::exists(io / "status")) {
    ADD_FAILURE() << "the namespace did not run: " << cmd;
    return r;
  }
  r.status = std::stoi(test::read_text(io / "status"));
  r.err = test::read_text(io / "err");
  r.left = test::read_text(io / "left");
  return r;
}

uint64_t pages(uint64_t bytes) {
  return (bytes + 4095) / 4096 * 4096;
}

class FullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!namespaces_allowed()) GTEST_SKIP() << "unprivileged user and mount namespaces are not allowed here";
    test::write_tiny_model_dir(dir_ / "m");
    // A tokenizer.json of 1 MiB (the tiny one padded with whitespace, still the same JSON),
    // so the disk can hold the weights and not it.
    std::string tok = test::read_text(dir_ / "m" / "tokenizer.json");
    tok.append((uint64_t{1} << 20) - tok.size(), ' ');
    test::write_text(dir_ / "m" / "tokenizer.json", tok);
    // The same quantization on a roomy disk: the weights' size.
    const auto r =
        test::run_cli({"quantize", "-m", path("m"), "--type", "int8", "--method", "rtn", "--out", path("q")});
    ASSERT_EQ(r.status, 0) << r.err;
    weights_ = fs::file_size(dir_ / "q" / "model.safetensors");
    fs::create_directory(dir_ / "disk");
    fs::create_directory(dir_ / "io");
  }
  std::string path(std::string_view name) const { return (dir_ / name).string(); }
  std::vector<std::string> quantize_onto_disk() const {
    return {"quantize", "-m", path("m"), "--type", "int8", "--method", "rtn", "--out", path("disk/q")};
  }

  test::TempDir dir_;
  uint64_t weights_ = 0;
};

TEST_F(FullDisk, NoRoomForTheWeightsIsRefusedNamingTheOutput) {
  const auto r = run_on_small_disk(dir_ / "disk", pages(weights_ / 2), dir_ / "io", quantize_onto_disk());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("nanoinfer: error: " + path("disk/q") + "/model.safetensors: needs ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("are free on the file system of " + path("disk/q") + "\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(".tmp."), std::string::npos) << r.err;  // the staging directory is not the user's name
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.left, "");
}

TEST_F(FullDisk, DiskFullWhileCopyingTheTokenizerSaysSoAndLeavesNothing) {
  // Room for the weights and the small files, then 256 KiB: a quarter of the tokenizer.
  const uint64_t size = pages(weights_) + 4 * 4096 + (256 << 10);
  const auto r = run_on_small_disk(dir_ / "disk", size, dir_ / "io", quantize_onto_disk());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "nanoinfer: error: " + path("disk/q") + "/tokenizer.json: write failed: No space left on device\n");
  EXPECT_EQ(r.left, "");
}

}  // namespace
}  // namespace nanoinfer
