// A multi-turn conversation on the chat template that reuses the KV cache across turns.
//
// The sequence always stands for a prefix of the rendered conversation: after a reply, it
// holds render_chat(messages, add_generation_prompt = true) followed by the reply's tokens
// (the end-of-turn token sampled last is not part of it). The next turn renders the whole
// conversation again and prefills only the text past that prefix, which begins with the
// "<|im_end|>\n" the template puts after every message, so the cache ends up holding exactly
// what the template renders, and no earlier token is pushed through the model twice.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generator.h"

namespace nanoinfer {

// A user message the conversation cannot take, refused by ChatSession::send before any work:
// it does not fit the context (what() says by how much and what to do). The conversation is
// unchanged and the next message may well fit: a REPL reports it and goes on.
class ChatTurnRefused : public Error {
 public:
  using Error::Error;
};

class ChatSession {
 public:
  // `system_prompt` empty: the template's default system prompt. `content` says whether
  // added-token text in messages ("<|im_end|>" typed by the user) is parsed as the token; by
  // default (AllAsText) it is plain text, so a user cannot end a turn or forge another.
  ChatSession(Generator& generator, const Tokenizer& tokenizer, std::string system_prompt,
              SpecialTokens content = SpecialTokens::AllAsText);

  // Adds a user turn, generates the reply (streamed to on_text) and records it (an interrupted
  // reply as far as it got). When the conversation would leave the reply less room than
  // min(options.max_new_tokens, half the context), the oldest turns (user message and reply)
  // are dropped, the system prompt kept, and the rest prefilled again: dropped_turns() says how
  // many. If the turn does not fit (even alone, or beside what cannot be dropped), throws
  // ChatTurnRefused and leaves the conversation as it was; a message longer than
  // max_message_bytes() is refused so before it is copied or tokenized. If the reply fails
  // part way (e.g. the model produces NaN logits), throws Error and starts over.
  GenerationStats send(std::string_view user_text, const StopRules& options, const TextSink& on_text);
  // The longest message send() tokenizes: 4 x (the longest token's bytes) x the context. No
  // longer message can fit: each token stands for at most the longest token's bytes of
  // normalized text, and NFC normalization shortens text less than 4 times (its largest
  // composition, three Hangul jamo into one syllable, takes 9 bytes to 3).
  size_t max_message_bytes() const;
  // Turns the last send() dropped to make room (0: none).
  size_t dropped_turns() const { return dropped_turns_; }

  // Starts over (keeps the system prompt).
  void reset();
  // A reasoning model's template variable (Qwen3's enable_thinking; default true): false puts
  // the empty think block in each generation prompt, so replies come without reasoning.
  void set_enable_thinking(bool on) { enable_thinking_ = on; }

  const std::vector<ChatMessage>& messages() const { return messages_; }
  // The text the generator's sequence stands for.
  const std::string& sequence_text() const { return sequence_text_; }

 private:
  Generator& generator_;
  const Tokenizer& tokenizer_;
  std::string system_prompt_;
  SpecialTokens content_;
  std::vector<ChatMessage> messages_;
  std::string sequence_text_;
  size_t dropped_turns_ = 0;
  bool enable_thinking_ = true;
  size_t max_token_bytes_ = 1;  // of the tokenizer's longest token

  // Tokens of the whole conversation rendered with the generation prompt.
  size_t rendered_tokens(std::span<const ChatMessage> messages) const;
};

}  // namespace nanoinfer
