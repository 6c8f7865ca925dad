#include "nanoinfer/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include "nanoinfer/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_utf8.h"

namespace nanoinfer {

// NFC via utf8proc. Code points below U+0300 are NFC-stable starters that can only compose
// with a following code point at or above U+0300 (lead byte >= 0xCC), so text without such
// bytes — all ASCII and Latin-1 text — is returned unchanged without calling utf8proc.
static bool nfc_may_change(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return static_cast<uint8_t>(c) >= 0xCC; });
}

std::string nfc_normalize(std::string_view text) {
  if (!nfc_may_change(text)) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) fail("NFC normalization failed: {}", utf8proc_errmsg(n));  // input is valid UTF-8
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

void AddedTokenMatcher::add(std::string content, int32_t id, bool special) {
  const auto first = static_cast<uint8_t>(content[0]);
  tokens_.push_back({std::move(content), id, special});
  auto& candidates = by_first_byte_[first];
  candidates.push_back(static_cast<uint32_t>(tokens_.size() - 1));
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text, size_t from,
                                                                bool include_special) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    const auto& candidates = by_first_byte_[static_cast<uint8_t>(text[pos])];
    for (uint32_t index : candidates) {
      const Entry& e = tokens_[index];
      if (e.special && !include_special) continue;
      if (text.compare(pos, e.content.size(), e.content) == 0) return Match{pos, e.content.size(), e.id};
    }
  }
  return std::nullopt;
}

Tokenizer::Tokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

// Calls on_text(section) for the text between matches of `matcher` and on_token(id) for
// each match, in order.
template <class OnText, class OnToken>
void split_added(const AddedTokenMatcher& matcher, std::string_view text, bool include_special, OnText on_text,
                 OnToken on_token) {
  size_t pos = 0;
  if (!matcher.empty()) {
    while (auto m = matcher.find(text, pos, include_special)) {
      if (m->begin > pos) on_text(text.substr(pos, m->begin - pos));
      on_token(m->id);
      pos = m->begin + m->length;
    }
  }
  if (pos < text.size()) on_text(text.substr(pos));
}

}  // namespace

void Tokenizer::encode_pieces_append(std::span<const TextPiece> pieces, std::vector<int32_t>& ids) const {
  const Impl& impl = *impl_;
  thread_local std::vector<std::string_view> pre_tokens;
  auto encode_section = [&](std::string_view section) {
    pre_tokens.clear();
    if (impl.split) {
      impl.split->split(section, pre_tokens);
    } else {
      pre_tokens.push_back(section);
    }
    for (std::string_view piece : pre_tokens) impl.bpe->encode_piece(piece, ids);
  };
  auto push_token = [&](int32_t id) { ids.push_back(id); };

  // The raw text between matched raw added tokens, gathered across pieces: usually one view
  // into one piece, joined into `joined` only when it spans pieces.
  std::vector<std::string_view> raw_parts;
  bool raw_parse_special = true;  // false if any part of it comes from an AsText piece
  bool raw_match_added = true;    // false if any part of it comes from an AllAsText piece
  std::string joined;
  // 3. NFC, then added tokens with normalized=true; 4-5. pre-tokenize and BPE.
  auto flush_raw = [&] {
    if (raw_parts.empty()) return;
    std::string_view raw = raw_parts.front();
    if (raw_parts.size() > 1) {
      joined.clear();
      for (std::string_view part : raw_parts) joined += part;
      raw = joined;
    }
    static const AddedTokenMatcher none{};
    const AddedTokenMatcher& added = raw_match_added ? impl.normalized_added : none;
    if (!impl.nfc || !nfc_may_change(raw)) {
      split_added(added, raw, raw_parse_special, encode_section, push_token);
    } else {
      const std::string normalized = nfc_normalize(raw);
      split_added(added, normalized, raw_parse_special, encode_section, push_token);
    }
    raw_parts.clear();
    raw_parse_special = true;
    raw_match_added = true;
  };

  std::vector<std::string> sanitized;  // stable storage: raw_parts may point into it
  sanitized.reserve(pieces.size());
  for (const TextPiece& piece : pieces) {
    // 1. Invalid UTF-8 becomes U+FFFD (see tokenizer.h); valid input is used in place.
    std::string_view text = piece.text;
    if (utf8::valid_prefix(text) != text.size()) {
      utf8::append_lossy(text, sanitized.emplace_back());
      text = sanitized.back();
    }
    // 2. Added tokens with normalized=false, matched on the raw text (none in AllAsText text).
    const bool parse_special = piece.special == SpecialTokens::Parse;
    if (piece.special == SpecialTokens::AllAsText) {
      if (!text.empty()) {
        raw_parts.push_back(text);
        raw_parse_special = false;
        raw_match_added = false;
      }
      continue;
    }
    split_added(
        impl.raw_added, text, parse_special,
        [&](std::string_view raw) {
          raw_parts.push_back(raw);
          raw_parse_special = raw_parse_special && parse_special;
        },
        [&](int32_t id) {
          flush_raw();
          ids.push_back(id);
        });
  }
  flush_raw();
}

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids, SpecialTokens special) const {
  const TextPiece piece{text, special};
  encode_pieces_append({&piece, 1}, ids);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, SpecialTokens special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  encode_append(text, ids, special);
  return ids;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || impl_->kind[id] == Impl::Kind::kNone) {
    fail("token id {} is not in the vocabulary of '{}' (size {})", id, impl_->origin, vocab_size());
  }
  return impl_->bytes[id];
}

bool Tokenizer::is_added_token(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->kind[id] >= Impl::Kind::kAdded;
}

bool Tokenizer::is_special_token(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->kind[id] == Impl::Kind::kAddedSpecial;
}

namespace {

// The reference's clean_up_tokenization: drops the space a word-level tokenizer put before
// punctuation and English contractions. Applied only when tokenizer_config.json asks.
std::string clean_up_tokenization(std::string s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) {
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
      out.append(s, pos, hit - pos);
      out += to;
    }
    out.append(s, pos);
    s = std::move(out);
  }
  return s;
}

}  // namespace

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  std::string run;  // bytes since the last added token, converted together
  for (int32_t id : ids) {
    const std::string_view bytes = token_bytes(id);
    if (is_added_token(id)) {
      utf8::append_lossy(run, text);
      run.clear();
      text += bytes;
    } else {
      run += bytes;
    }
  }
  utf8::append_lossy(run, text);
  return impl_->clean_up_tokenization_spaces ? clean_up_tokenization(std::move(text)) : text;
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->bytes.size());
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token_content) const {
  const uint32_t* id = impl_->content_to_id.find(token_content);
  if (id == nullptr) return std::nullopt;
  return static_cast<int32_t>(*id);
}

std::optional<int32_t> Tokenizer::eos_token_id() const {
  return impl_->eos_id;
}
std::optional<int32_t> Tokenizer::pad_token_id() const {
  return impl_->pad_id;
}
std::span<const int32_t> Tokenizer::prompt_prefix() const {
  return impl_->prompt_prefix;
}
std::span<const int32_t> Tokenizer::prompt_suffix() const {
  return impl_->prompt_suffix;
}
ChatFormat Tokenizer::chat_format() const {
  return impl_->chat_format;
}
bool Tokenizer::cleans_up_spaces() const {
  return impl_->clean_up_tokenization_spaces;
}

ChatFormat chat_format_of(std::string_view chat_template) {
  if (chat_template.find("<|start_header_id|>") != std::string_view::npos) return ChatFormat::Llama3;
  if (chat_template.find("<think>") != std::string_view::npos) return ChatFormat::Qwen3;
  return ChatFormat::ChatML;
}

size_t Tokenizer::cache_entries() const {
  return impl_->bpe->cache_entries();
}
void Tokenizer::clear_cache() const {
  impl_->bpe->clear_cache();
}

StreamDecoder::StreamDecoder(const Tokenizer& tok) : tok_(&tok) {}

std::string StreamDecoder::push(int32_t id) {
  const std::string_view bytes = tok_->token_bytes(id);
  std::string out;
  if (tok_->is_added_token(id)) {
    utf8::append_lossy(pending_, out);  // an added token ends any pending sequence
    pending_.clear();
    out += bytes;
    return release(std::move(out), false);
  }
  pending_ += bytes;
  const size_t hold = utf8::incomplete_tail(pending_);
  utf8::append_lossy(std::string_view(pending_).substr(0, pending_.size() - hold), out);
  pending_.erase(0, pending_.size() - hold);
  return release(std::move(out), false);
}

std::string StreamDecoder::flush() {
  std::string out;
  utf8::append_lossy(pending_, out);
  pending_.clear();
  return release(std::move(out), true);
}

// Every cleanup pattern is a space and then non-space characters, but for " ' ", whose third
// character is a space too. The cut goes before the last run of spaces (and before a " '"
// that ends at it): a pattern that starts before the cut ends before it, one that starts after
// lies wholly in the held text, and a replacement only removes a pattern's leading space, so it
// cannot join text across the cut either. The emitted pieces, cleaned apart, are thus the
// cleanup of the whole text.
std::string StreamDecoder::release(std::string text, bool final) {
  if (!tok_->cleans_up_spaces()) return text;
  held_ += text;
  size_t cut = final ? held_.size() : held_.rfind(' ');
  if (cut == std::string::npos) cut = held_.size();
  while (!final && cut > 0) {
    if (held_[cut - 1] == ' ') {
      --cut;
    } else if (cut >= 2 && held_[cut - 1] == '\'' && held_[cut - 2] == ' ') {
      cut -= 2;
    } else {
      break;
    }
  }
  std::string out = clean_up_tokenization(held_.substr(0, cut));
  held_.erase(0, cut);
  return out;
}

}  // namespace nanoinfer
