// Test helpers: scratch directories and hand-built safetensors bytes (for corruption cases
// the writer would never produce).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer::test {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// 8-byte little-endian length of `header`, the header, then `data_bytes` bytes 0, 1, 2, ...
std::vector<std::byte> raw_safetensors(std::string_view header, size_t data_bytes);

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes);
void write_text(const std::filesystem::path& path, std::string_view text);
std::vector<std::byte> read_bytes(const std::filesystem::path& path);
std::string read_text(const std::filesystem::path& path);

// data/default-model in the checkout: the files the binary embeds, read from disk (the tests
// compare the two, and tools read the directory).
std::filesystem::path default_model_dir();

// The committed config.json of Qwen2.5-0.5B-Instruct (data/qwen2.5-0.5b-instruct/).
std::filesystem::path qwen25_config_path();

// A small Qwen2 config.json (hidden 64, 2 layers, 4 heads, 2 KV heads, vocab 256, tied).
std::string small_qwen2_config_json(bool tie_word_embeddings = true);

}  // namespace nanoinfer::test
