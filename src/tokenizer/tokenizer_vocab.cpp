// Building the tokenizer from a GGUF-style vocabulary (token strings, token types, merges and a
// pre-tokenizer name) into the same tables tokenizer_load.cpp builds from tokenizer.json, so
// both sources encode through one implementation.
#include <array>

#include "nanoinfer/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_utf8.h"

namespace nanoinfer {

namespace {

// The pre-tokenizers GGUF names (tokenizer.ggml.pre), as their tokenizer.json files spell the
// Split regex (the patterns SplitPattern reproduces): Qwen2's (Qwen2.5 and Qwen3, after NFC)
// and Llama 3's (digits in runs of up to 3, no normalizer; whole vocabulary words bypass the
// merges, its tokenizer.json's ignore_merges).
struct PreTokenizer {
  std::string_view name;
  std::string_view regex;
  bool nfc;
  bool ignore_merges;
};
constexpr std::array<PreTokenizer, 2> kPreTokenizers{{
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     true, false},
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     false, true},
}};

// GGUF token types (llama.cpp's numbering).
constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

[[noreturn]] void bad(const Tokenizer::Impl& impl, std::string_view what) {
  fail("tokenizer '{}': {}", impl.origin, what);
}

}  // namespace

Tokenizer Tokenizer::from_vocab(const TokenizerVocab& v, std::string_view origin) {
  auto impl = std::make_shared<Impl>();
  impl->origin = origin;
  const PreTokenizer* pre = nullptr;
  for (const PreTokenizer& p : kPreTokenizers)
    if (p.name == v.pre) pre = &p;
  if (pre == nullptr)
    bad(*impl, fmt::format("pre-tokenizer '{}' is not supported (supported: qwen2, llama-bpe)", v.pre));
  impl->nfc = pre->nfc;
  impl->split = SplitPattern::from_regex(pre->regex);
  StringTable whole_tokens;  // bytes -> id, for ignore_merges
  if (v.tokens.size() != v.token_types.size())
    bad(*impl, fmt::format("{} tokens but {} token types", v.tokens.size(), v.token_types.size()));
  if (v.tokens.size() >= (size_t{1} << 24)) bad(*impl, fmt::format("{} tokens (at most 2^24)", v.tokens.size()));

  static const std::vector<int> byte_of = byte_level_decoder_table();
  std::array<int32_t, 256> byte_ids;
  byte_ids.fill(-1);
  auto set_token = [&](size_t id, std::string bytes, Impl::Kind kind) {
    if (id >= impl->bytes.size()) {
      impl->bytes.resize(id + 1);
      impl->kind.resize(id + 1, Impl::Kind::kNone);
    }
    impl->bytes[id] = std::move(bytes);
    impl->kind[id] = kind;
  };
  impl->content_to_id.reserve(v.tokens.size());
  impl->bytes.reserve(v.tokens.size());

  // Vocabulary first, then added tokens, as tokenizer.json loads them: an added token's
  // content takes precedence over a vocabulary spelling that happens to equal it.
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const int32_t type = v.token_types[id];
    if (type == kControl || type == kUserDefined || type == kUnused) continue;
    if (type != kNormal)
      bad(*impl,
          fmt::format("token {} has type {} (supported: 1 normal, 3 control, 4 user-defined, 5 unused)", id, type));
    const std::string& spelling = v.tokens[id];
    std::string bytes;
    for (size_t pos = 0; pos < spelling.size();) {
      const utf8::Decoded d = utf8::decode(spelling, pos);
      if (d.status != utf8::Status::kValid || d.cp >= byte_of.size() || byte_of[d.cp] < 0)
        bad(*impl, fmt::format("token {} ('{}') is not in the byte-level alphabet", id, spelling));
      bytes += static_cast<char>(byte_of[d.cp]);
      pos += d.length;
    }
    if (bytes.empty()) bad(*impl, fmt::format("token {} is empty", id));
    if (bytes.size() == 1) byte_ids[static_cast<uint8_t>(bytes[0])] = static_cast<int32_t>(id);
    if (pre->ignore_merges) whole_tokens.insert(bytes, static_cast<uint32_t>(id));
    set_token(id, std::move(bytes), Impl::Kind::kVocab);
    if (!impl->content_to_id.insert(spelling, static_cast<uint32_t>(id)))
      bad(*impl, fmt::format("token '{}' appears twice", spelling));
  }
  for (int b = 0; b < 256; ++b)
    if (byte_ids[b] < 0) bad(*impl, fmt::format("no token for byte 0x{:02X}", b));
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const int32_t type = v.token_types[id];
    if (type != kControl && type != kUserDefined) continue;
    const std::string& content = v.tokens[id];
    if (content.empty()) bad(*impl, fmt::format("added token {} is empty", id));
    set_token(id, content, type == kControl ? Impl::Kind::kAddedSpecial : Impl::Kind::kAdded);
    impl->content_to_id.set(content, static_cast<uint32_t>(id));
    impl->raw_added.add(content, static_cast<int32_t>(id), type == kControl);  // matched whole, before NFC
  }

  std::vector<BpeMerge> merges;
  merges.reserve(v.merges.size());
  std::string joined;
  for (const std::string& m : v.merges) {
    const size_t rank = merges.size();
    const size_t space = m.find(' ');
    if (space == std::string::npos || m.find(' ', space + 1) != std::string::npos)
      bad(*impl, fmt::format("merge {} ('{}') is not two tokens separated by one space", rank, m));
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right = std::string_view(m).substr(space + 1);
    joined.assign(left).append(right);
    int32_t ids[3];
    const std::string_view parts[3] = {left, right, joined};
    for (int i = 0; i < 3; ++i) {
      const uint32_t* id = impl->content_to_id.find(parts[i]);
      if (id == nullptr) bad(*impl, fmt::format("merge {} uses '{}', which is not in the vocabulary", rank, parts[i]));
      ids[i] = static_cast<int32_t>(*id);
    }
    merges.push_back({ids[0], ids[1], ids[2]});
  }
  impl->bpe.emplace(byte_ids, merges, pre->ignore_merges, std::move(whole_tokens));

  for (const auto& [name, id] : {std::pair{"eos", v.eos_id}, std::pair{"padding", v.pad_id},
                                 std::pair{"bos", v.add_bos ? v.bos_id : std::nullopt}}) {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= impl->kind.size() || impl->kind[*id] == Impl::Kind::kNone))
      bad(*impl, fmt::format("{} token id {} is not a token", name, *id));
  }
  impl->eos_id = v.eos_id;
  impl->pad_id = v.pad_id;
  if (v.add_bos && v.bos_id) impl->prompt_prefix = {*v.bos_id};
  if (v.add_eos && v.eos_id) impl->prompt_suffix = {*v.eos_id};
  impl->chat_format = chat_format_of(v.chat_template);
  return Tokenizer(std::move(impl));
}

}  // namespace nanoinfer
