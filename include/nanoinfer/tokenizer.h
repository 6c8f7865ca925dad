// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (the Qwen2 family's
// format), implemented from the file alone: nothing model-specific is hard-coded.
//
// Pipeline of encode(), in the order the reference implementation applies it:
//   1. invalid UTF-8 in the input is replaced by U+FFFD, one per maximal ill-formed subpart
//      (the Unicode / WHATWG "substitution of maximal subparts" policy, i.e. what a
//      TextDecoder or Rust's from_utf8_lossy produces from the same bytes);
//   2. added tokens whose "normalized" flag is false (<|im_start|>, ...) are split out first,
//      leftmost-longest, so they are never broken up;
//   3. each remaining section is normalized (NFC), then added tokens with normalized=true
//      are split out of it;
//   4. the Split pre-tokenizer's regex cuts each section into pieces (hand-written matcher,
//      see src/pretokenize.h);
//   5. each piece's UTF-8 bytes are merged by BPE (lowest merge rank first, leftmost on
//      equal rank), with a cache of results per piece.
// decode() concatenates token bytes; each run of bytes between added tokens is converted
// with the same U+FFFD policy, added tokens contribute their content verbatim.
//
// Loading rejects every tokenizer.json field or component type this implementation does not
// reproduce exactly, naming it, so another model either tokenizes correctly or fails loudly.
//
// A Tokenizer is cheap to copy (copies share the immutable model and the piece cache).
// encode/decode are safe to call from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer {

// Which chat template a model's tokenizer_config.json (or GGUF tokenizer.chat_template) carries,
// recognised by its markup (nanoinfer/chat_template.h renders each): Qwen2.5's ChatML (also
// the default, when there is none), Qwen3's ChatML with <think> blocks, Llama 3's headers.
enum class ChatFormat { ChatML, Qwen3, Llama3 };
ChatFormat chat_format_of(std::string_view chat_template);

// A byte-level BPE vocabulary as GGUF files carry it (tokenizer.ggml.*), for
// Tokenizer::from_vocab. Spans: the caller keeps the data alive during the call only.
struct TokenizerVocab {
  // [n] by id: a vocabulary token in its byte-level spelling (as in tokenizer.json's
  // model.vocab, "Ġthe"), or an added token's content ("<|im_end|>").
  std::span<const std::string> tokens;
  // [n] GGUF token types: 1 normal (BPE vocabulary), 3 control (added, special),
  // 4 user-defined (added, not special), 5 unused (padding ids that are no token).
  std::span<const int32_t> token_types;
  std::span<const std::string> merges;  // "left right", in rank order
  std::string_view pre;                 // the pre-tokenizer by name; "qwen2"
  std::optional<int32_t> eos_id;
  std::optional<int32_t> pad_id;
  std::optional<int32_t> bos_id;   // tokenizer.ggml.bos_token_id
  bool add_bos = false;            // tokenizer.ggml.add_bos_token: a plain prompt starts with bos_id
  bool add_eos = false;            // tokenizer.ggml.add_eos_token: an embedding input ends with eos_id
  std::string_view chat_template;  // tokenizer.chat_template, or empty
};

// Whether encode() turns the text of an added token into that token. Parse is the reference
// tokenizer's default: every added token is matched. AsText encodes the text of special ones
// ("<|im_end|>", "special": true in tokenizer.json) as ordinary text, while non-special added
// tokens ("<think>", Qwen's "<tool_call>", "</tool_response>") are still matched, as Hugging
// Face's split_special_tokens does. AllAsText matches no added token at all: the text is
// ordinary text whatever it spells, so text from an untrusted source (a chat message, a tool
// result) can neither end a turn nor forge one nor forge tool markup; chat content uses it.
enum class SpecialTokens { Parse, AsText, AllAsText };

// A piece of a text to encode and how special-token text in it is treated.
struct TextPiece {
  std::string_view text;
  SpecialTokens special = SpecialTokens::Parse;
};

class Tokenizer {
 public:
  // Reads model_dir/tokenizer.json and, if present, model_dir/tokenizer_config.json
  // (eos/pad token names, clean_up_tokenization_spaces, add_bos_token).
  static Tokenizer load(const std::filesystem::path& model_dir);
  // `origin` names the source in error messages (e.g. a file path).
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view origin);
  // As from_json, also applying a tokenizer_config.json (may be empty: no config).
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                             std::string_view origin);
  // From a GGUF-style vocabulary (src/tokenizer/tokenizer_gguf.h reads one from a file). The
  // "qwen2" pre-tokenizer is Qwen2's tokenizer.json pipeline: NFC, its Split regex, byte-level
  // BPE, added tokens matched whole before normalization. Rejects anything else by name.
  static Tokenizer from_vocab(const TokenizerVocab& vocab, std::string_view origin);

  // Added tokens in the text are recognised, special ones only with SpecialTokens::Parse.
  // Never fails for any byte string.
  std::vector<int32_t> encode(std::string_view text, SpecialTokens special = SpecialTokens::Parse) const;
  // Appends to `ids` instead of returning a new vector.
  void encode_append(std::string_view text, std::vector<int32_t>& ids,
                     SpecialTokens special = SpecialTokens::Parse) const;
  // Encodes the concatenation of `pieces`, each with its own special-token setting. Only the
  // added-token matching is per piece (a token cut by a piece boundary is not recognised):
  // text between matched tokens is normalized and pre-tokenized as one, across piece
  // boundaries, so the result equals encode() of the concatenation whenever no special
  // token's text overlaps an AsText piece, no added token's text an AllAsText piece, and no
  // added token's text a boundary. (Added tokens matched after normalization, normalized=true
  // in tokenizer.json, are matched in a run of text between raw matches only when no part of
  // the run is AllAsText, nor, for special ones, AsText.)
  void encode_pieces_append(std::span<const TextPiece> pieces, std::vector<int32_t>& ids) const;

  // Throws nanoinfer::Error for an id outside [0, vocab_size()) or one no token has.
  std::string decode(std::span<const int32_t> ids) const;

  // The bytes one token stands for (may be partial UTF-8); an added token's content.
  // Throws for an invalid id, like decode.
  std::string_view token_bytes(int32_t id) const;
  bool is_added_token(int32_t id) const;  // false for invalid ids
  bool is_special_token(int32_t id) const;

  int32_t vocab_size() const;  // 1 + the largest id, added tokens included
  // By content as written in tokenizer.json: an added token ("<|im_end|>") or a vocabulary
  // entry in its byte-level spelling ("Ġthe").
  std::optional<int32_t> token_id(std::string_view token_content) const;

  // From tokenizer_config.json, when given there and known to the vocabulary.
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  // The special tokens a plain text (not a chat) is encoded after, as the model was trained:
  // Llama 3's <|begin_of_text|>, from tokenizer.json's TemplateProcessing post-processor or a
  // GGUF file's add_bos_token; empty for Qwen. encode() never adds them: encode_raw_prompt does.
  std::span<const int32_t> prompt_prefix() const;
  // The special tokens after the text in the same post-processor (Qwen3-Embedding's
  // "$A <|endoftext|>"), or a GGUF file's add_eos_token (its eos id). Embedding inputs end with
  // them (nanoinfer/embedding.h); generation prompts never do.
  std::span<const int32_t> prompt_suffix() const;
  ChatFormat chat_format() const;  // of the chat template that came with it
  bool cleans_up_spaces() const;   // tokenizer_config.json's clean_up_tokenization_spaces

  // The per-piece BPE cache: number of entries, and clearing it (for cold-cache benches).
  size_t cache_entries() const;
  void clear_cache() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// Turns a stream of generated ids into text without ever emitting half a UTF-8 sequence:
// bytes of an incomplete (but so far valid) sequence are held back until the next token
// completes it. Bytes that can never become valid are emitted as U+FFFD at once.
// The concatenation of every push() and the final flush() equals tok.decode(all ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok);
  std::string push(int32_t id);  // the text completed by this token (may be empty)
  std::string flush();           // what is left, an incomplete tail rendered as U+FFFD
  size_t held_bytes() const { return pending_.size() + held_.size(); }  // pushed, not yet returned

 private:
  // With clean_up_tokenization_spaces (Llama 3), text from the last run of spaces on is held
  // back (its cleanup depends on what follows) and the rest is emitted cleaned: every cleanup
  // pattern starts with a space, so none spans the cut (see release()).
  std::string release(std::string text, bool final);

  const Tokenizer* tok_;
  std::string pending_;  // at most 3 bytes: a valid but incomplete UTF-8 sequence
  std::string held_;     // cleanup only: decoded text not yet emitted
};

}  // namespace nanoinfer
