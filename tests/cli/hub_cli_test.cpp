// The commands against a Hugging Face cache laid out as huggingface_hub lays it (blobs, snapshot
// links, refs): `inspect ORG/NAME[@REVISION]` resolves there as generate does, a sharded
// checkpoint included; and what a user or a cache supplies reaches stderr with its control
// characters escaped.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/run_cli.h"
#include "support/sharded.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

const std::string kCachedCommit = "89abcdef0123456789abcdef0123456789abcdef";

// Every file of `model` as a blob of cache/models--ORG--NAME linked from snapshots/<commit>,
// and refs/main naming the commit.
void cache_model_dir(const fs::path& cache, const std::string& org_name, const fs::path& model) {
  std::string dir_name = "models--" + org_name;
  dir_name.replace(dir_name.find('/'), 1, "--");
  const fs::path repo = cache / dir_name;
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / kCachedCommit);
  fs::create_directories(repo / "refs");
  int blob = 0;
  for (const auto& entry : fs::directory_iterator(model)) {
    const std::string etag = std::string(39, '0') + std::to_string(blob++);
    fs::copy_file(entry.path(), repo / "blobs" / etag);
    fs::create_symlink(fs::path("../../blobs") / etag, repo / "snapshots" / kCachedCommit / entry.path().filename());
  }
  test::write_text(repo / "refs" / "main", kCachedCommit);
}

class HubCli : public ::testing::Test {
 protected:
  test::CliProcess run(const std::vector<std::string>& args) const {
    test::CliOptions o;
    o.env = {"HF_HUB_CACHE=" + (dir_ / "cache").string(), "HF_HUB_OFFLINE=1"};
    return test::run_cli_process(args, o);
  }
  fs::path snapshot(const std::string& dir_name) const {
    return dir_ / "cache" / dir_name / "snapshots" / kCachedCommit;
  }
  test::TempDir dir_;
};

TEST_F(HubCli, InspectResolvesModelNamesFromTheCache) {
  cache_model_dir(dir_ / "cache", "org/tiny", test::default_model_dir());
  test::write_sharded_copy(test::default_model_dir(), dir_ / "sharded", 2);
  cache_model_dir(dir_ / "cache", "org/tiny-sharded", dir_ / "sharded");
  for (const std::string& name : std::vector<std::string>{"org/tiny", "org/tiny@main", "org/tiny@" + kCachedCommit}) {
    const test::CliProcess r = run({"inspect", name});
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("model:  " + name + " (" + snapshot("models--org--tiny").string() + ")\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("file:   " + (snapshot("models--org--tiny") / "model.safetensors").string() + ", "),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("verdict: OK"), std::string::npos) << r.out;
  }
  const test::CliProcess sharded = run({"inspect", "-m", "org/tiny-sharded"});
  ASSERT_EQ(sharded.exit_code, 0) << sharded.err;
  EXPECT_NE(
      sharded.out.find("file:   " + (snapshot("models--org--tiny-sharded") / "model.safetensors.index.json").string() +
                       " (2 shards), "),
      std::string::npos)
      << sharded.out;
  // The same model generates from the cache by name, and from the shards.
  const test::CliProcess a = run({"generate", "-m", "org/tiny", "-p", "ROMEO:", "-n", "6", "--temp", "0"});
  const test::CliProcess b = run({"generate", "-m", "org/tiny-sharded", "-p", "ROMEO:", "-n", "6", "--temp", "0"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);

  const test::CliProcess absent = run({"inspect", "org/absent"});
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_EQ(absent.err,
            "nanoinfer: error: org/absent: no such file or directory, nor a model in the Hugging Face "
            "cache " +
                (dir_ / "cache").string() + " (download it with `nanoinfer pull org/absent`)\n");
}

TEST_F(HubCli, HostileNamesAreEscapedOnStderr) {
  const test::CliProcess pull = run({"pull", "\x1b[2J\x1b[Horg/m"});
  EXPECT_EQ(pull.exit_code, 1);
  EXPECT_EQ(pull.err,
            "nanoinfer: error: '\\x1b[2J\\x1b[Horg/m': not a model name of the form "
            "ORG/NAME[@REVISION][:QUANT] (e.g. Qwen/Qwen2.5-0.5B-Instruct)\n");
  const test::CliProcess rm = run({"rm", "org/m\x07"});
  EXPECT_EQ(rm.exit_code, 1);
  EXPECT_EQ(rm.err.find('\x07'), std::string::npos) << rm.err;
  const test::CliProcess gen = run({"generate", "-m", "no-such\x1b]0;x\x07", "-p", "x"});
  EXPECT_EQ(gen.exit_code, 1);
  EXPECT_EQ(gen.err.rfind("nanoinfer: error: no-such\\x1b]0;x\\x07: not a model directory (", 0), 0u) << gen.err;
}

}  // namespace
}  // namespace nanoinfer
