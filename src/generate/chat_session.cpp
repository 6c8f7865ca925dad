#include "nanoinfer/chat_session.h"

#include <fmt/format.h>

#include <algorithm>

#include "nanoinfer/error.h"

namespace nanoinfer {

ChatSession::ChatSession(Generator& generator, const Tokenizer& tokenizer, std::string system_prompt,
                         SpecialTokens content)
    : generator_(generator), tokenizer_(tokenizer), system_prompt_(std::move(system_prompt)), content_(content) {
  for (int32_t id = 0; id < tokenizer_.vocab_size(); ++id) {
    try {
      max_token_bytes_ = std::max(max_token_bytes_, tokenizer_.token_bytes(id).size());
    } catch (const Error&) {
      // an id no token has
    }
  }
  reset();
}

size_t ChatSession::max_message_bytes() const {
  return 4 * max_token_bytes_ * generator_.context_size();
}

void ChatSession::reset() {
  generator_.reset();
  messages_.clear();
  sequence_text_.clear();
  if (!system_prompt_.empty()) messages_.push_back({"system", system_prompt_});
}

size_t ChatSession::rendered_tokens(std::span<const ChatMessage> messages) const {
  std::vector<int32_t> ids;
  tokenizer_.encode_pieces_append(
      chat_text_pieces(render_chat_pieces(messages, true, {}, tokenizer_.chat_format(), enable_thinking_), 0, content_),
      ids);
  return ids.size();
}

GenerationStats ChatSession::send(std::string_view user_text, const StopRules& options, const TextSink& on_text) {
  if (user_text.size() > max_message_bytes()) {
    throw ChatTurnRefused(fmt::format(
        "message not sent: {} bytes cannot fit a context of {} tokens (at most {} bytes: 4 x {}, the longest "
        "token's bytes, per token); shorten it or raise -c",
        user_text.size(), generator_.context_size(), max_message_bytes(), max_token_bytes_));
  }
  messages_.push_back({"user", std::string(user_text)});
  dropped_turns_ = 0;
  // Room for the reply: what the conversation so far plus this turn leave must be at least
  // `reserve`, else the oldest turns go (the fewest that make it fit). If no number of drops
  // does, nothing is dropped and the turn is refused below as before.
  const size_t context = generator_.context_size();
  const size_t reserve = std::min(static_cast<size_t>(std::max<int64_t>(options.max_new_tokens, 0)), context / 2);
  const size_t first = !messages_.empty() && messages_.front().role == "system" ? 1 : 0;
  if (messages_.size() - first > 1) {
    std::vector<int32_t> fresh;
    tokenizer_.encode_pieces_append(
        chat_text_pieces(render_chat_pieces(messages_, true, {}, tokenizer_.chat_format(), enable_thinking_),
                         sequence_text_.size(), content_),
        fresh);
    if (generator_.tokens().size() + fresh.size() + reserve > context) {
      std::vector<ChatMessage> kept(messages_);
      size_t drops = 0;
      while (kept.size() - first > 1) {
        // A turn is a user message and the reply after it.
        const size_t n = kept.size() - first > 2 && kept[first + 1].role == "assistant" ? 2 : 1;
        kept.erase(kept.begin() + static_cast<ptrdiff_t>(first), kept.begin() + static_cast<ptrdiff_t>(first + n));
        ++drops;
        if (rendered_tokens(kept) + reserve <= context) {
          messages_ = std::move(kept);
          dropped_turns_ = drops;
          generator_.reset();
          sequence_text_.clear();
          break;
        }
      }
    }
  }
  const std::vector<ChatPiece> pieces =
      render_chat_pieces(messages_, /*add_generation_prompt=*/true, {}, tokenizer_.chat_format(), enable_thinking_);
  std::string rendered;
  for (const ChatPiece& piece : pieces) rendered += piece.text;
  if (!rendered.starts_with(sequence_text_)) {
    // Qwen3's template drops the <think> block of a reply once a new query follows it: the
    // cached text is no longer a prefix, so the conversation is prefilled again.
    generator_.reset();
    sequence_text_.clear();
  }
  // Only what the cache lacks is encoded: the text past sequence_text_, which starts at the
  // "<|im_end|>" closing the last reply, so the cut is on a token boundary.
  std::vector<int32_t> ids;
  tokenizer_.encode_pieces_append(chat_text_pieces(pieces, sequence_text_.size(), content_), ids);
  // The generator's own condition (its history, sampled tokens included, plus these), checked
  // here so that a turn that does not fit is a refusal, told apart from a failure.
  const size_t used = generator_.tokens().size();
  if (used + ids.size() > context) {
    messages_.pop_back();
    if (used == 0) {
      throw ChatTurnRefused(fmt::format(
          "message not sent: with the chat template it is {} tokens, more than the context of {} holds; shorten it "
          "or raise -c",
          ids.size(), context));
    }
    throw ChatTurnRefused(fmt::format(
        "message not sent: it needs {} more tokens but only {} of the context's {} are left; /reset, shorten it or "
        "raise -c",
        ids.size(), context - std::min(used, context), context));
  }
  const size_t reply_start = generator_.tokens().size() + ids.size();
  const size_t tokens_before = generator_.tokens().size();
  GenerationStats stats;
  try {
    stats = generator_.generate(ids, options, on_text);
  } catch (const Error& e) {
    messages_.pop_back();
    // A refusal (the turn does not fit) changes nothing. A failure during the reply (e.g.
    // non-finite logits) leaves the cache holding tokens no message stands for: start over.
    if (generator_.tokens().size() != tokens_before) {
      reset();
      fail("{} (the conversation was reset)", e.what());
    }
    throw;
  }
  const std::string reply = tokenizer_.decode(generator_.tokens().subspan(reply_start));
  messages_.push_back({"assistant", reply});
  sequence_text_ = rendered + reply;
  return stats;
}

}  // namespace nanoinfer
