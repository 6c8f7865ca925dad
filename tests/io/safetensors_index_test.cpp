// Sharded safetensors checkpoints: the index parser's refusals, exact, and the shards opened as
// one file (tensors from their own shard; every disagreement between index and shards named).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "io/safetensors.h"
#include "io/safetensors_index.h"
#include "nanoinfer/error.h"
#include "support/checks.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::raw_safetensors;
using test::write_bytes;
using test::write_text;

std::string index_error(std::string_view text) {
  return error_of([&] { parse_safetensors_index(text, "i.json"); });
}

TEST(SafetensorsIndex, ParsesShardsSortedWithTheirTensors) {
  const SafetensorsIndex index = parse_safetensors_index(
      R"({"metadata": {"total_size": 40}, "weight_map": {"b": "model-00002-of-00002.safetensors",
          "a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})",
      "i.json");
  EXPECT_EQ(index.shards,
            (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  ASSERT_EQ(index.shard_of.size(), 3u);
  EXPECT_EQ(index.shard_of.at("a"), 0u);
  EXPECT_EQ(index.shard_of.at("b"), 1u);
  EXPECT_EQ(index.shard_of.at("c"), 1u);
}

TEST(SafetensorsIndex, RefusesMalformedIndexes) {
  EXPECT_THAT(index_error(R"({"weight_map": {"a": "x.safetensors")"), testing::StartsWith("i.json: not valid JSON: "));
  EXPECT_EQ(index_error("[1]"), "i.json: must be a JSON object, found array");
  EXPECT_EQ(index_error(R"({"metadata": {}})"), "i.json: no \"weight_map\" object (tensor name -> shard file)");
  EXPECT_EQ(index_error(R"({"weight_map": []})"), "i.json: no \"weight_map\" object (tensor name -> shard file)");
  EXPECT_EQ(index_error(R"({"weight_map": {}})"), "i.json: \"weight_map\" lists no tensor");
  EXPECT_EQ(index_error(R"({"metadata": 3, "weight_map": {"a": "x.safetensors"}})"),
            "i.json: \"metadata\" must be an object, found number");
  EXPECT_EQ(index_error(R"({"weight_map": {"a": 7}})"), "i.json: tensor 'a' maps to 7, not a file name");
  EXPECT_EQ(index_error(R"({"weight_map": {"": "x.safetensors"}})"),
            "i.json: \"weight_map\" holds a tensor with an empty name");
  EXPECT_EQ(index_error(std::string(100, '[') + std::string(100, ']')),
            "i.json: JSON nested deeper than 64 levels (at byte 64)");
}

TEST(SafetensorsIndex, RefusesDuplicateKeys) {
  EXPECT_EQ(index_error(R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})"),
            "i.json: tensor 'a' is listed twice in \"weight_map\"");
  EXPECT_EQ(index_error(R"({"weight_map": {"a": "x.safetensors"}, "weight_map": {"b": "x.safetensors"}})"),
            "i.json: duplicate key 'weight_map'");
}

TEST(SafetensorsIndex, RefusesShardNamesOutsideTheDirectory) {
  const auto maps_to = [](std::string_view file) {
    return index_error(fmt::format(R"({{"weight_map": {{"t": "{}"}}}})", file));
  };
  EXPECT_EQ(maps_to("../x.safetensors"),
            "i.json: tensor 't' maps to '../x.safetensors': a path; a shard must be a "
            "file beside the index");
  EXPECT_EQ(maps_to("/etc/x.safetensors"),
            "i.json: tensor 't' maps to '/etc/x.safetensors': a path; a shard must "
            "be a file beside the index");
  EXPECT_EQ(maps_to(R"(sub\\x.safetensors)"),
            "i.json: tensor 't' maps to 'sub\\x.safetensors': a path; a shard "
            "must be a file beside the index");
  EXPECT_EQ(maps_to(".."), "i.json: tensor 't' maps to '..': not a file name");
  EXPECT_EQ(maps_to(""), "i.json: tensor 't' maps to '': an empty file name");
  EXPECT_EQ(maps_to("config.json"), "i.json: tensor 't' maps to 'config.json': not a .safetensors file");
  EXPECT_EQ(maps_to(R"(\u001b[31mx.safetensors)"),
            "i.json: tensor 't' maps to '\\x1b[31mx.safetensors': a control character in the file name");
}

TEST(SafetensorsIndex, RefusesAnIndexPastItsSizeLimit) {
  const std::string huge(kMaxSafetensorsIndexBytes + 1, ' ');
  EXPECT_EQ(index_error(huge), fmt::format("i.json: {} bytes, more than the {} byte limit of an index",
                                           kMaxSafetensorsIndexBytes + 1, kMaxSafetensorsIndexBytes));
}

// Two shards: "a" F32 [2] and "b" F32 [1] in the first, "c" F32 [3] in the second; the data
// bytes are 0, 1, 2, ... in each (raw_safetensors).
class SafetensorsShards : public ::testing::Test {
 protected:
  static constexpr const char* kFirst = "model-00001-of-00002.safetensors";
  static constexpr const char* kSecond = "model-00002-of-00002.safetensors";

  void SetUp() override {
    write_bytes(dir_ / kFirst, raw_safetensors(R"({"__metadata__":{"format":"pt"},)"
                                               R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                               12));
    write_bytes(dir_ / kSecond, raw_safetensors(R"({"c":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", 12));
    write_index(R"("a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                   "c": "model-00002-of-00002.safetensors")");
  }
  void write_index(std::string_view weight_map) const {
    write_text(index(), fmt::format(R"({{"metadata": {{"total_size": 32}}, "weight_map": {{{}}}}})", weight_map));
  }
  fs::path index() const { return dir_ / "model.safetensors.index.json"; }
  std::string open_error() const {
    return error_of([&] { SafetensorsFile::open_sharded(index()); });
  }
  test::TempDir dir_;
};

TEST_F(SafetensorsShards, ReadsEachTensorFromItsShard) {
  const SafetensorsFile f = SafetensorsFile::open_sharded(index());
  EXPECT_EQ(f.path(), index());
  EXPECT_EQ(f.shard_count(), 2u);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.file_size(), fs::file_size(dir_ / kFirst) + fs::file_size(dir_ / kSecond));
  EXPECT_EQ(f.layout().metadata.at("format"), "pt");
  const TensorInfo* c = f.find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->shard, 1u);
  std::byte got[12];
  f.read(*c, 0, got);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(static_cast<int>(got[i]), i);  // the second shard's bytes
  const TensorView b = f.get("b");
  EXPECT_EQ(static_cast<int>(b.data[0]), 8);  // the first shard's bytes 8..11
  EXPECT_EQ(static_cast<int>(f.get("a").data[7]), 7);
}

TEST_F(SafetensorsShards, FollowsAShardLinkedFromElsewhere) {
  // The hub cache's snapshot files are symlinks into its blobs directory.
  const test::TempDir blobs;
  fs::rename(dir_ / kSecond, blobs / "blob");
  fs::create_symlink(blobs / "blob", dir_ / kSecond);
  EXPECT_EQ(SafetensorsFile::open_sharded(index()).find("c")->nbytes(), 12u);
}

TEST_F(SafetensorsShards, RefusesAMissingShard) {
  fs::remove(dir_ / kSecond);
  EXPECT_EQ(open_error(), fmt::format("{}: shard 'model-00002-of-00002.safetensors' is not in {}", index().string(),
                                      dir_.path().string()));
}

TEST_F(SafetensorsShards, RefusesATensorTheIndexListsButItsShardLacks) {
  write_index(R"("a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors")");
  EXPECT_EQ(open_error(), index().string() +
                              ": the index maps tensor 'd' to shard 'model-00002-of-00002.safetensors', which does "
                              "not hold it");
}

TEST_F(SafetensorsShards, RefusesATensorOfAShardMissingFromTheIndex) {
  write_index(R"("a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors")");
  EXPECT_EQ(open_error(),
            index().string() + ": tensor 'b' of shard 'model-00001-of-00002.safetensors' is not in the index");
}

TEST_F(SafetensorsShards, RefusesATensorInTheWrongShard) {
  write_index(R"("a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors")");
  EXPECT_EQ(open_error(), index().string() +
                              ": tensor 'b' is in shard 'model-00001-of-00002.safetensors', but the index maps it "
                              "to 'model-00002-of-00002.safetensors'");
}

TEST_F(SafetensorsShards, RefusesATensorInTwoShards) {
  write_bytes(dir_ / kSecond, raw_safetensors(R"({"c":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                                              R"("a":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                                              20));
  EXPECT_EQ(open_error(), index().string() +
                              ": tensor 'a' is in two shards, 'model-00001-of-00002.safetensors' and "
                              "'model-00002-of-00002.safetensors'");
}

TEST_F(SafetensorsShards, NamesTheShardWhoseHeaderIsCorrupt) {
  write_bytes(dir_ / kSecond, raw_safetensors(R"({"c":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 12));
  EXPECT_EQ(open_error(), (dir_ / kSecond).string() +
                              ": tensor 'c': data_offsets [0, 16] run past the end of the data section (12 bytes)");
}

TEST_F(SafetensorsShards, RefusesAShardThatIsADirectoryOrAnIndexTooLarge) {
  fs::remove(dir_ / kSecond);
  fs::create_directory(dir_ / kSecond);
  EXPECT_EQ(open_error(), (dir_ / kSecond).string() + ": is a directory, not a file");
  // A sparse file: the size is refused before anything is read.
  fs::resize_file(index(), kMaxSafetensorsIndexBytes + 1);
  EXPECT_EQ(open_error(), fmt::format("{}: too large to read into memory ({} bytes; the limit is {} bytes)",
                                      index().string(), kMaxSafetensorsIndexBytes + 1, kMaxSafetensorsIndexBytes));
}

}  // namespace
}  // namespace nanoinfer
