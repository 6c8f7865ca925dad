#include "tokenizer/tokenizer_gguf.h"

#include "nanoinfer/error.h"

namespace nanoinfer {

Tokenizer tokenizer_from_gguf(const GgufLayout& layout) {
  const std::string& model = layout.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    fail("{}: tokenizer.ggml.model '{}' is not supported (supported: gpt2, byte-level BPE)", layout.origin, model);
  if (layout.find("tokenizer.ggml.pre") == nullptr)
    fail("{}: metadata 'tokenizer.ggml.pre' is missing (supported: qwen2, llama-bpe)", layout.origin);
  auto optional_id = [&](std::string_view key) -> std::optional<int32_t> {
    if (layout.find(key) == nullptr) return std::nullopt;
    const uint32_t id = layout.get_u32(key);
    if (id > static_cast<uint32_t>(INT32_MAX)) fail("{}: metadata '{}': {} is not a token id", layout.origin, key, id);
    return static_cast<int32_t>(id);
  };
  TokenizerVocab v;
  v.tokens = layout.get_array_of<std::string>("tokenizer.ggml.tokens");
  v.token_types = layout.get_array_of<int32_t>("tokenizer.ggml.token_type");
  v.merges = layout.get_array_of<std::string>("tokenizer.ggml.merges");
  v.pre = layout.get_string("tokenizer.ggml.pre");
  v.eos_id = optional_id("tokenizer.ggml.eos_token_id");
  v.pad_id = optional_id("tokenizer.ggml.padding_token_id");
  v.bos_id = optional_id("tokenizer.ggml.bos_token_id");
  v.add_bos = layout.find("tokenizer.ggml.add_bos_token") != nullptr && layout.get_bool("tokenizer.ggml.add_bos_token");
  v.add_eos = layout.find("tokenizer.ggml.add_eos_token") != nullptr && layout.get_bool("tokenizer.ggml.add_eos_token");
  if (const GgufValue* t = layout.find("tokenizer.chat_template"))
    if (const auto* s = std::get_if<std::string>(&t->value)) v.chat_template = *s;
  return Tokenizer::from_vocab(v, layout.origin);
}

}  // namespace nanoinfer
