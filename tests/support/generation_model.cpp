#include "support/generation_model.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "base/weight_blocks.h"
#include "io/gguf.h"
#include "nanoinfer/gguf_export.h"
#include "support/files.h"

namespace nanoinfer::test {

namespace {

// GPT-2's byte -> printable code point map used by byte-level BPE vocabularies: printable
// Latin-1 bytes map to themselves, the others to U+0100 upwards in byte order.
std::array<std::string, 256> byte_symbols() {
  std::array<std::string, 256> out;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    out[static_cast<size_t>(b)] = s;
  }
  return out;
}

}  // namespace

std::string tiny_tokenizer_json() {
  using Json = nlohmann::json;
  const auto sym = byte_symbols();
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[sym[static_cast<size_t>(b)]] = b;
  // 41 merges in rank order; each part is a byte symbol or an earlier merge. "Ġ" is the space.
  const std::pair<const char*, const char*> merges[] = {
      {"Ġ", "t"},  {"h", "e"},  {"i", "n"},  {"e", "r"},   {"a", "n"},  {"Ġ", "a"},  {"o", "n"},
      {"r", "e"},  {"a", "t"},  {"e", "n"},  {"o", "r"},   {"Ġ", "s"},  {"Ġ", "w"},  {"Ġ", "o"},
      {"i", "t"},  {"e", "s"},  {"i", "s"},  {"o", "u"},   {"a", "r"},  {"e", "d"},  {"Ġ", "b"},
      {"Ġ", "c"},  {"Ġ", "f"},  {"Ġ", "m"},  {"Ġ", "p"},   {"a", "l"},  {"l", "e"},  {"l", "l"},
      {"s", "t"},  {"n", "d"},  {"Ġt", "h"}, {"Ġth", "e"}, {"in", "g"}, {"Ġa", "n"}, {"Ġan", "d"},
      {"er", "e"}, {"Ġ", "in"}, {"Ġt", "o"}, {"Ġo", "f"},  {"Ġ", "is"}, {"Ġw", "h"}};
  Json merge_list = Json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    merge_list.push_back(Json::array({a, b}));
    vocab[std::string(a) + b] = id++;
  }
  Json added = Json::array();
  for (const char* name : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    added.push_back({{"id", id++},
                     {"content", name},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const Json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  const Json doc = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", Json::array({{{"type", "Split"},
                                        {"pattern",
                                         {{"Regex",
                                           "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                           "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       byte_level})}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}}};
  return doc.dump();
}

void fill_f32_tensor(const std::filesystem::path& dir, std::string_view name, float value) {
  std::vector<std::byte> bytes = read_bytes(dir / "model.safetensors");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  const auto header = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, header_len));
  const auto& entry = header.at(std::string(name));
  if (entry.at("dtype") != "F32") throw std::runtime_error("fill_f32_tensor: not F32");
  const size_t begin = 8 + header_len + entry.at("data_offsets")[0].get<size_t>();
  const size_t end = 8 + header_len + entry.at("data_offsets")[1].get<size_t>();
  for (size_t pos = begin; pos < end; pos += 4) std::memcpy(bytes.data() + pos, &value, 4);
  write_bytes(dir / "model.safetensors", bytes);
}

void make_logits_overflow(const std::filesystem::path& dir) {
  fill_f32_tensor(dir, "model.norm.weight", 3e38f);
  fill_f32_tensor(dir, "lm_head.weight", 3e38f);
}

void write_huge_k_scale_gguf(const std::filesystem::path& file, WeightType type) {
  size_t block_bytes = 0, d_offset = 0;
  if (type == WeightType::Q4_K) {
    block_bytes = sizeof(BlockQ4_K), d_offset = offsetof(BlockQ4_K, d);
  } else if (type == WeightType::Q5_K) {
    block_bytes = sizeof(BlockQ5_K), d_offset = offsetof(BlockQ5_K, d);
  } else if (type == WeightType::Q6_K) {
    block_bytes = sizeof(BlockQ6_K), d_offset = offsetof(BlockQ6_K, d);
  } else {
    throw std::runtime_error("write_huge_k_scale_gguf: not a K-quant type");
  }
  export_gguf(default_model_dir(), file, type);
  std::vector<std::byte> bytes = read_bytes(file);
  const GgufLayout layout = parse_gguf(bytes, file.string());
  const auto ggml = ggml_type_of(type);
  size_t blocks = 0;
  for (const GgufTensorInfo& t : layout.tensors) {
    size_t step = block_bytes, d_at = d_offset;
    if (t.type == ggml_type_of(WeightType::Q8_0)) {  // the tied embedding: its scale d first, then 32 int8
      step = sizeof(uint16_t) + 32, d_at = 0;
    } else if (t.type != ggml) {
      continue;
    }
    const size_t begin = layout.data_offset + t.offset;
    for (size_t at = begin; at < begin + t.nbytes; at += step, ++blocks) {
      bytes[at + d_at] = std::byte{0xFF};  // 0x7BFF: 65504
      bytes[at + d_at + 1] = std::byte{0x7B};
    }
  }
  if (blocks == 0) throw std::runtime_error("write_huge_k_scale_gguf: no tensor of the type");
  std::filesystem::remove(file);
  write_bytes(file, bytes);
}

void write_tiny_model_dir(const std::filesystem::path& dir) {
  const std::filesystem::path source = std::filesystem::path(NANOINFER_SOURCE_DIR) / "tests/data/models/tiny-untied";
  std::filesystem::create_directories(dir);
  for (const char* name : {"config.json", "generation_config.json", "model.safetensors"}) {
    std::filesystem::copy_file(source / name, dir / name, std::filesystem::copy_options::overwrite_existing);
  }
  write_text(dir / "tokenizer.json", tiny_tokenizer_json());
}

}  // namespace nanoinfer::test
