// The state behind nanoinfer::Tokenizer, built by tokenizer_load.cpp and used by
// tokenizer.cpp. Immutable after loading except for the BPE cache (which locks).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/tokenizer.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_table.h"

namespace nanoinfer {

// Finds added tokens in text: at each position the longest token that starts there, the
// leftmost position first (the reference's DictionarySplitter and HF's LeftmostLongest
// Aho-Corasick agree on this).
class AddedTokenMatcher {
 public:
  // `special`: matched only when special tokens are parsed (SpecialTokens::Parse).
  void add(std::string content, int32_t id, bool special);
  bool empty() const { return tokens_.empty(); }
  struct Match {
    size_t begin;
    size_t length;
    int32_t id;
  };
  // The first match at or after `from`, if any; special tokens only if `include_special`.
  std::optional<Match> find(std::string_view text, size_t from, bool include_special) const;

 private:
  struct Entry {
    std::string content;
    int32_t id;
    bool special;
  };
  std::vector<Entry> tokens_;
  // Indices into tokens_ by first byte, longest first.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

// GPT-2's byte-level alphabet, per code point: the byte it stands for, or -1 (tokenizer_load.cpp).
std::vector<int> byte_level_decoder_table();

struct Tokenizer::Impl {
  enum class Kind : uint8_t { kNone, kVocab, kAdded, kAddedSpecial };

  std::string origin;
  std::vector<std::string> bytes;  // [vocab_size] the bytes of each id (an added token's content)
  std::vector<Kind> kind;          // [vocab_size]
  StringTable content_to_id;       // as spelled in tokenizer.json

  AddedTokenMatcher raw_added;         // added tokens with normalized=false
  AddedTokenMatcher normalized_added;  // added tokens with normalized=true (NFC content)
  bool nfc = false;
  std::optional<SplitPattern> split;  // nullopt: the whole section is one piece
  std::optional<BpeModel> bpe;        // constructed in place (it holds a mutex)

  bool clean_up_tokenization_spaces = false;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> pad_id;
  std::vector<int32_t> prompt_prefix;  // tokens a plain text is encoded after (Llama 3: BOS)
  std::vector<int32_t> prompt_suffix;  // tokens an embedding input ends with (Qwen3-Embedding: <|endoftext|>)
  ChatFormat chat_format = ChatFormat::ChatML;
};

}  // namespace nanoinfer
