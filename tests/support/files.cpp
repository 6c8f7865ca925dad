#include "support/files.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace nanoinfer::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/nanoinfer-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::byte> raw_safetensors(std::string_view header, size_t data_bytes) {
  std::vector<std::byte> out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(n >> (8 * i)));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<std::byte>(i));
  return out;
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

void write_text(const std::filesystem::path& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  const std::string s = read_text(path);
  std::vector<std::byte> out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = static_cast<std::byte>(s[i]);
  return out;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path.string());
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::filesystem::path default_model_dir() {
  return std::filesystem::path(NANOINFER_SOURCE_DIR) / "data/default-model";
}

std::filesystem::path qwen25_config_path() {
  return std::filesystem::path(NANOINFER_SOURCE_DIR) / "data/qwen2.5-0.5b-instruct/config.json";
}

std::string small_qwen2_config_json(bool tie_word_embeddings) {
  return std::string(R"({
  "architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2",
  "hidden_size": 64,
  "intermediate_size": 160,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "vocab_size": 256,
  "max_position_embeddings": 512,
  "rope_theta": 1000000.0,
  "rms_norm_eps": 1e-06,
  "torch_dtype": "bfloat16",
  "use_sliding_window": false,
  "tie_word_embeddings": )") +
         (tie_word_embeddings ? "true" : "false") + "\n}\n";
}

}  // namespace nanoinfer::test
