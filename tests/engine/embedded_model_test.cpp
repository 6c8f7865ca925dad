// The default model built into the executable (src/engine/default_model.h): its bytes are
// data/default-model's files, the loader reads them in place, and an empty model path opens it
// with no file on disk (the installed binary's test, `installed_binary` in CMakeLists.txt, runs
// the executable itself away from the checkout).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/default_model.h"
#include "engine/model_source.h"
#include "io/safetensors.h"
#include "nanoinfer/error.h"
#include "nanoinfer/inspect.h"
#include "nanoinfer/model_files.h"
#include "nanoinfer/open_model.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

TEST(EmbeddedModel, HoldsTheCheckoutsFilesByteForByte) {
  const std::vector<std::string> expected = {"config.json", "generation_config.json", "model.safetensors",
                                             "tokenizer.json", "tokenizer_config.json"};
  std::vector<std::string> names;
  for (const EmbeddedFile& f : embedded_default_model()) {
    names.emplace_back(f.name);
    const std::vector<std::byte> disk = test::read_bytes(test::default_model_dir() / f.name);
    ASSERT_EQ(f.bytes.size(), disk.size()) << f.name;
    EXPECT_TRUE(std::equal(disk.begin(), disk.end(), f.bytes.begin())) << f.name;
    // Page-aligned, as a mapping of the file would be.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.bytes.data()) % 4096, 0u) << f.name;
  }
  EXPECT_EQ(names, expected);
  EXPECT_FALSE(embedded_file("README.md").has_value());
}

TEST(EmbeddedModel, WeightsAreReadInPlaceNotCopied) {
  const std::unique_ptr<const ModelSource> src = open_model_source("");
  ASSERT_TRUE(src->embedded);
  ASSERT_TRUE(src->safetensors.has_value());
  const auto bytes = embedded_file("model.safetensors");
  ASSERT_TRUE(bytes.has_value());
  EXPECT_EQ(src->safetensors->bytes().data(), bytes->data());
  EXPECT_EQ(src->safetensors->file_size(), bytes->size());
  EXPECT_EQ(src->files.dir, embedded_model_label());
  EXPECT_EQ(embedded_model_label().filename(), "default-model");

  // A tensor read through the view equals the same tensor read from the checkout's file.
  const SafetensorsFile disk = SafetensorsFile::open(test::default_model_dir() / "model.safetensors");
  const TensorInfo* in_memory = src->safetensors->find("model.norm.weight");
  const TensorInfo* on_disk = disk.find("model.norm.weight");
  ASSERT_NE(in_memory, nullptr);
  ASSERT_NE(on_disk, nullptr);
  std::vector<std::byte> a(in_memory->nbytes()), b(on_disk->nbytes());
  src->safetensors->read(*in_memory, 0, a);
  disk.read(*on_disk, 0, b);
  EXPECT_EQ(a, b);
  // A read past the end is an error naming the embedded file, as for a file on disk.
  std::vector<std::byte> big(bytes->size() + 1);
  try {
    src->safetensors->read(*in_memory, 0, big);
    ADD_FAILURE() << "a read past the tensor's end was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("default-model"), std::string::npos) << e.what();
  }
}

TEST(EmbeddedModel, EmptyPathOpensTheSameModelAsTheDirectory) {
  const OpenedModel embedded = open_model("", {.model = {.threads = 1}});
  const OpenedModel disk = open_model(test::default_model_dir().string(), {.model = {.threads = 1}});
  EXPECT_EQ(embedded.dir, embedded_model_label());
  EXPECT_EQ(embedded.tokenizer.vocab_size(), disk.tokenizer.vocab_size());
  EXPECT_EQ(embedded.generation.eos_token_ids, disk.generation.eos_token_ids);
  EXPECT_EQ(embedded.model.weight_bytes(), disk.model.weight_bytes());
  const std::vector<int32_t> ids = disk.tokenizer.encode("ROMEO: But soft, what light");
  EXPECT_EQ(embedded.tokenizer.encode("ROMEO: But soft, what light"), ids);
  EXPECT_EQ(open_tokenizer("").encode("ROMEO: But soft, what light"), ids);
  const ModelReport report = inspect_model("");
  EXPECT_TRUE(report.problems.empty()) << report.problems.front();
  EXPECT_EQ(report.files.weights, embedded_model_label() / "model.safetensors");
}

}  // namespace
}  // namespace nanoinfer
