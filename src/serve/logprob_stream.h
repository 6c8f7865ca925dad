// Streamed logprobs that ride with their text. A generation step streams text as soon as it
// is safe (an incomplete UTF-8 character, a possible stop-string start and text Llama 3's
// space cleanup may still change are held back), while each token's logprob is known when the
// token is chosen. A stream chunk carries both, as OpenAI's does: a token's entry is released
// together with the text that completes the token, and a chunk's text ends where a token ends,
// on a character boundary. So for a tokenizer whose text is its tokens' bytes (byte-level BPE,
// Qwen's), the entries' bytes of every chunk concatenate to exactly its text.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "serve/api.h"

namespace nanoinfer::serve {

class LogprobAligner {
 public:
  void add_token(TokenLogprob entry);    // a token kept, before its text is streamed
  void add_text(std::string_view text);  // text the step streamed
  // After a step: moves into `text` and `entries` the text and entries of the tokens whose text
  // is out, up to the last token boundary that is also a character boundary. `held` is
  // GenerationStep::held_bytes(): the kept tokens' bytes not streamed yet.
  void release(size_t held, std::string& text, std::vector<TokenLogprob>& entries);
  // At the end of the generation (the step's held-back text streamed): everything left. After
  // a stop string (`cut`), tokens whose text lies wholly in the cut-off part have no entry.
  void finish(bool cut, std::string& text, std::vector<TokenLogprob>& entries);

 private:
  void take(size_t count, size_t bytes, std::string& text, std::vector<TokenLogprob>& entries);

  std::string text_;                  // streamed, not yet released
  std::deque<TokenLogprob> entries_;  // not yet released
  size_t entry_bytes_ = 0;            // the tokens' bytes of entries_
};

}  // namespace nanoinfer::serve
