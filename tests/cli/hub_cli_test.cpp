// The commands against a Hugging Face cache: what a user or a cache supplies reaches stderr with
// its control characters escaped.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

class HubCli : public ::testing::Test {
 protected:
  test::CliProcess run(const std::vector<std::string>& args) const {
    test::CliOptions o;
    o.env = {"HF_HUB_CACHE=" + (dir_ / "cache").string(), "HF_HUB_OFFLINE=1"};
    return test::run_cli_process(args, o);
  }
  test::TempDir dir_;
};

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
