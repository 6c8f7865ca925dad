// The hub cache's names and layout: model references, where the cache is, resolution of
// `-m ORG/NAME` from a cache laid out as huggingface_hub lays it, the GGUF quant choice, list
// and rm. The network side (pull) is tested against a local hub in tests/hub/pull.test.mjs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include "hub/file_digest.h"
#include "hub/gguf_choice.h"
#include "hub/hub_names.h"
#include "nanoinfer/error.h"
#include "nanoinfer/hub_cache.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Sets (or, for nullptr, unsets) an environment variable for one scope.
class HubEnvVar {
 public:
  HubEnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~HubEnvVar() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string hub_error_of(const auto& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void write_hub_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  test::write_text(path, text);
}

// A snapshot as huggingface_hub writes it: each file a blob named `etag`, linked relatively.
void add_hub_file(const fs::path& repo, const std::string& commit, const std::string& path, const std::string& etag,
                  const std::string& bytes) {
  write_hub_text(repo / "blobs" / etag, bytes);
  const fs::path link = repo / "snapshots" / commit / path;
  fs::create_directories(link.parent_path());
  fs::create_symlink(fs::path("../../blobs") / etag, link);
}

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

TEST(HubCache, ParsesModelReferences) {
  const ModelRef plain = *parse_model_ref("Qwen/Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(plain.repo, "Qwen/Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(plain.revision, "main");
  EXPECT_FALSE(plain.revision_given);
  EXPECT_EQ(plain.quant, "");
  EXPECT_EQ(plain.text(), "Qwen/Qwen2.5-0.5B-Instruct");

  const ModelRef full = *parse_model_ref("org/name-GGUF@refs/pr/1:Q4_K_M");
  EXPECT_EQ(full.repo, "org/name-GGUF");
  EXPECT_EQ(full.revision, "refs/pr/1");
  EXPECT_TRUE(full.revision_given);
  EXPECT_EQ(full.quant, "Q4_K_M");
  EXPECT_EQ(full.text(), "org/name-GGUF@refs/pr/1:Q4_K_M");
  EXPECT_EQ(parse_model_ref("org/name:q8_0")->quant, "q8_0");
  EXPECT_EQ(parse_model_ref("org/name@" + kCommit)->revision, kCommit);

  for (const char* path : {"", "/abs/path", "./org/name", "../org/name", "name", "a/b/c", "org/..", "../x",
                           "org/name.gguf", "org/na me", "org/name@", "org/name:", "org/name@../x", "~/m"}) {
    EXPECT_FALSE(parse_model_ref(path)) << path;
  }
  EXPECT_THAT(hub_error_of([] { model_ref_or_fail("a/b/c"); }), HasSubstr("ORG/NAME[@REVISION][:QUANT]"));
}

TEST(HubCache, RecognizesShardsAndSplitParts) {
  EXPECT_TRUE(hub::is_safetensors_shard("model-00001-of-00002.safetensors"));
  EXPECT_TRUE(hub::is_safetensors_shard("model-1-of-2.safetensors"));
  for (const char* no : {"model.safetensors", "model-00001.safetensors", "model--of-2.safetensors",
                         "consolidated-00001-of-00002.safetensors", "model-00001-of-00002.safetensors.index.json"}) {
    EXPECT_FALSE(hub::is_safetensors_shard(no)) << no;
  }
  EXPECT_TRUE(hub::is_split_gguf_part("sub/m-Q8_0-00002-of-00003.GGUF"));
  EXPECT_FALSE(hub::is_split_gguf_part("m-Q8_0.gguf"));
  EXPECT_FALSE(hub::is_split_gguf_part("m-Q8_0-0001-of-00003.gguf"));
  EXPECT_TRUE(hub::is_commit_hash(kCommit));
  EXPECT_FALSE(hub::is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));
}

TEST(HubCache, CacheDirectoryFollowsTheHubsEnvironment) {
  HubEnvVar cache("HF_HUB_CACHE", nullptr), home("HF_HOME", nullptr), xdg("XDG_CACHE_HOME", nullptr),
      user("HOME", "/home/u");
  EXPECT_EQ(hub_cache_dir(), fs::path("/home/u/.cache/huggingface/hub"));
  HubEnvVar xdg2("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(hub_cache_dir(), fs::path("/xdg/huggingface/hub"));
  HubEnvVar home2("HF_HOME", "/hf");
  EXPECT_EQ(hub_cache_dir(), fs::path("/hf/hub"));
  HubEnvVar cache2("HF_HUB_CACHE", "/cache");
  EXPECT_EQ(hub_cache_dir(), fs::path("/cache"));
  EXPECT_EQ(repo_cache_dir("/cache", "meta-llama/Llama-3.2-1B"), fs::path("/cache/models--meta-llama--Llama-3.2-1B"));
}

TEST(HubCache, OfflineTakesTheHubsTrueValues) {
  for (const char* on : {"1", "true", "TRUE", "yes", "On"}) {
    HubEnvVar offline("HF_HUB_OFFLINE", on);
    EXPECT_TRUE(hub_offline()) << on;
  }
  for (const char* off : {"0", "", "false", "no"}) {
    HubEnvVar offline("HF_HUB_OFFLINE", off);
    EXPECT_FALSE(hub_offline()) << off;
  }
}

TEST(HubCache, ChoosesTheGgufFileTheQuantNames) {
  const std::vector<std::string> files = {"README.md", "m-Q4_K.gguf", "m-Q4_K_M.gguf", "m-q8_0.gguf", "sub/x-F16.gguf"};
  EXPECT_EQ(hub::choose_gguf(files, "Q4_K_M", "o/m"), "m-Q4_K_M.gguf");
  EXPECT_EQ(hub::choose_gguf(files, "q4_k", "o/m"), "m-Q4_K.gguf");  // not m-Q4_K_M.gguf
  EXPECT_EQ(hub::choose_gguf(files, "Q8_0", "o/m"), "m-q8_0.gguf");
  EXPECT_EQ(hub::choose_gguf(files, "f16", "o/m"), "sub/x-F16.gguf");
  EXPECT_EQ(hub::choose_gguf({"only.Q5_K_S.gguf"}, "", "o/m"), "only.Q5_K_S.gguf");
  EXPECT_EQ(hub::gguf_quant_label("qwen2.5-0.5b-instruct-q4_k_m.gguf"), "Q4_K_M");
  EXPECT_THAT(hub_error_of([&] { hub::choose_gguf(files, "", "o/m"); }),
              HasSubstr("o/m: 4 GGUF files; name one with :QUANT: :Q4_K (m-Q4_K.gguf), :Q4_K_M (m-Q4_K_M.gguf), "
                        ":Q8_0 (m-q8_0.gguf), :F16 (sub/x-F16.gguf)"));
  EXPECT_THAT(hub_error_of([&] { hub::choose_gguf(files, "IQ2_XS", "o/m"); }),
              HasSubstr("no GGUF file is quantized as IQ2_XS"));
  EXPECT_THAT(hub_error_of([] {
                hub::choose_gguf({"m-Q8_0-00001-of-00002.gguf", "m-Q8_0-00002-of-00002.gguf"}, "Q8_0", "o/m");
              }),
              HasSubstr("split in parts"));
  EXPECT_THAT(hub_error_of([] { hub::choose_gguf({"config.json"}, "", "o/m"); }), HasSubstr("o/m: has no GGUF file"));
}

TEST(HubCache, ResolvesModelNamesFromAHubLaidCache) {
  test::TempDir dir;
  HubEnvVar cache("HF_HUB_CACHE", dir.path().c_str());
  const fs::path repo = dir / "models--org--dir-model";
  add_hub_file(repo, kCommit, "config.json", std::string(40, 'a'), "{}");
  write_hub_text(repo / "refs" / "main", kCommit);
  const fs::path snapshot = repo / "snapshots" / kCommit;
  EXPECT_EQ(resolve_model_path("org/dir-model"), snapshot);
  EXPECT_EQ(resolve_model_path("org/dir-model@main"), snapshot);
  EXPECT_EQ(resolve_model_path("org/dir-model@" + kCommit), snapshot);
  EXPECT_EQ(hub_repo_of_path(snapshot), "org/dir-model");
  EXPECT_EQ(hub_repo_of_path(snapshot / "x.gguf"), "org/dir-model");
  EXPECT_EQ(hub_repo_of_path(dir.path()), std::nullopt);
  EXPECT_THAT(hub_error_of([] { resolve_model_path("org/dir-model@v2"); }),
              HasSubstr("nor a model in the Hugging Face cache"));
  EXPECT_THAT(hub_error_of([] { resolve_model_path("org/absent"); }),
              HasSubstr("org/absent: no such file or directory, nor a model in the Hugging Face cache"));
  EXPECT_THAT(hub_error_of([] { resolve_model_path("org/absent"); }), HasSubstr("`nanoinfer pull org/absent`"));

  const fs::path gguf_repo = dir / "models--org--m-GGUF";
  add_hub_file(gguf_repo, kCommit, "m-Q8_0.gguf", std::string(64, 'b'), "GGUF");
  add_hub_file(gguf_repo, kCommit, "m-F32.gguf", std::string(64, 'c'), "GGUF.");
  write_hub_text(gguf_repo / "refs" / "main", kCommit);
  EXPECT_EQ(resolve_model_path("org/m-GGUF:Q8_0"), gguf_repo / "snapshots" / kCommit / "m-Q8_0.gguf");
  EXPECT_THAT(hub_error_of([] { resolve_model_path("org/m-GGUF"); }), HasSubstr("2 GGUF files"));

  // A path on disk wins over a model name, and paths that are no model name are left alone.
  test::TempDir cwd;
  const fs::path before = fs::current_path();
  fs::current_path(cwd.path());
  fs::create_directories("org/dir-model");
  EXPECT_EQ(resolve_model_path("org/dir-model"), fs::path("org/dir-model"));
  fs::current_path(before);
  EXPECT_EQ(resolve_model_path("/no/such/dir"), fs::path("/no/such/dir"));
  EXPECT_EQ(resolve_model_path(""), fs::path());
}

TEST(HubCache, ListsAndRemovesModels) {
  test::TempDir dir;
  const fs::path repo = dir / "models--org--m";
  add_hub_file(repo, kCommit, "config.json", std::string(40, 'a'), "12345");
  add_hub_file(repo, kCommit, "w/m-Q8_0.gguf", std::string(64, 'b'), "1234567890");
  write_hub_text(repo / "blobs" / (std::string(64, 'c') + ".incomplete"), "123");
  write_hub_text(repo / "refs" / "main", kCommit);
  fs::create_directories(dir / "datasets--org--d");
  const std::vector<CachedModel> models = list_cached_models(dir.path());
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].repo, "org/m");
  EXPECT_EQ(models[0].bytes, 18u);  // each blob once, the partial one included
  ASSERT_EQ(models[0].refs.size(), 1u);
  EXPECT_EQ(models[0].refs[0], std::make_pair(std::string("main"), kCommit));
  EXPECT_EQ(models[0].gguf_quants, std::vector<std::string>{"Q8_0"});
  EXPECT_EQ(remove_cached_model(dir.path(), "org/m"), 18u);
  EXPECT_FALSE(fs::exists(repo));
  EXPECT_TRUE(fs::exists(dir / "datasets--org--d"));
  EXPECT_THAT(hub_error_of([&] { remove_cached_model(dir.path(), "org/m"); }),
              HasSubstr("org/m: not in the Hugging Face cache"));
}

// Text a user or a hostile cache supplies reaches the terminal with its control characters
// escaped: an ANSI sequence in a model name, the cache's path or a file name is shown, never run.
TEST(HubCache, MessagesEscapeControlCharacters) {
  EXPECT_EQ(hub_error_of([] { model_ref_or_fail("\x1b]0;title\x07org/m\n"); }),
            "'\\x1b]0;title\\x07org/m\\n': not a model name of the form ORG/NAME[@REVISION][:QUANT] (e.g. "
            "Qwen/Qwen2.5-0.5B-Instruct)");
  test::TempDir dir;
  const std::string cache = (dir / "c\x1b[2J").string();
  HubEnvVar env("HF_HUB_CACHE", cache.c_str());
  EXPECT_EQ(hub_error_of([] { resolve_model_path("org/absent"); }),
            "org/absent: no such file or directory, nor a model in the Hugging Face cache " + dir.path().string() +
                "/c\\x1b[2J (download it with `nanoinfer pull org/absent`)");
  EXPECT_EQ(hub_error_of([&] { remove_cached_model(cache, "org/m\r"); }),
            "org/m\\r: not in the Hugging Face cache " + dir.path().string() + "/c\\x1b[2J");
  EXPECT_EQ(hub_error_of([] {
              hub::choose_gguf({"a-Q8_0.gguf", "\x1b[31mb-Q8_0.gguf"}, "Q8_0", "o/m");
            }),
            "o/m: 2 GGUF files match Q8_0; name one with :QUANT: :Q8_0 (\\x1b[31mb-Q8_0.gguf), :Q8_0 (a-Q8_0.gguf)");
  EXPECT_EQ(hub_error_of([] { hub::choose_gguf({"\x1b[1mm-Q8_0.gguf"}, "Q4_0", "o/m"); }),
            "o/m: no GGUF file is quantized as Q4_0 (choose one of: :Q8_0 (\\x1b[1mm-Q8_0.gguf))");
}

TEST(HubCache, DigestsAreTheHubsChecksums) {
  test::TempDir dir;
  write_hub_text(dir / "f", "hello\n");
  // `git hash-object` of "hello\n", and `sha256sum` of it.
  EXPECT_EQ(hub::file_digest(dir / "f", hub::Digest::GitBlobSha1), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(hub::file_digest(dir / "f", hub::Digest::Sha256),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
}

}  // namespace
}  // namespace nanoinfer
