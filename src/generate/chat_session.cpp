#include "nanoinfer/chat_session.h"

#include "nanoinfer/error.h"

namespace nanoinfer {

ChatSession::ChatSession(Generator& generator, const Tokenizer& tokenizer, std::string system_prompt,
                         SpecialTokens content)
    : generator_(generator), tokenizer_(tokenizer), system_prompt_(std::move(system_prompt)), content_(content) {
  reset();
}

void ChatSession::reset() {
  generator_.reset();
  messages_.clear();
  sequence_text_.clear();
  if (!system_prompt_.empty()) messages_.push_back({"system", system_prompt_});
}

GenerationStats ChatSession::send(std::string_view user_text, const StopRules& options,
                                  const TextSink& on_text) {
  messages_.push_back({"user", std::string(user_text)});
  const std::vector<ChatPiece> pieces = render_chat_pieces(messages_, /*add_generation_prompt=*/true);
  std::string rendered;
  for (const ChatPiece& piece : pieces) rendered += piece.text;
  if (!rendered.starts_with(sequence_text_)) {
    messages_.pop_back();
    fail("chat: the rendered conversation no longer extends the cached one; /reset");
  }
  // Only what the cache lacks is encoded: the text past sequence_text_, which starts at the
  // "<|im_end|>" closing the last reply, so the cut is on a token boundary.
  std::vector<int32_t> ids;
  tokenizer_.encode_pieces_append(chat_text_pieces(pieces, sequence_text_.size(), content_), ids);
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
