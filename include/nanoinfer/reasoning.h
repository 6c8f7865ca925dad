// A reasoning model's reply split into its reasoning and its answer. Qwen3 (thinking on)
// writes "<think>\n...\n</think>\n\n" and then the answer; a template may also open the block
// in the prompt, so that the reply starts inside it. The splitter takes the reply as it streams,
// in pieces cut anywhere (a tag split across tokens included), and hands out what is decided:
// reasoning (the text inside the block, without the newlines that pad it) and content (the
// rest, without the newlines after "</think>"). Text that could still be the start of a tag is
// held back until it is known. A block that never closes (the reply was cut) is all reasoning;
// a reply that does not start with "<think>" (after whitespace) is all content. Streamed or
// whole, the same text is split the same way.
#pragma once

#include <string>
#include <string_view>

namespace nanoinfer {

class ReasoningSplitter {
 public:
  // `inside`: the prompt already opened the think block.
  explicit ReasoningSplitter(bool inside = false);
  // Adds the next piece of the reply; appends what is decided to `reasoning` and `content`.
  void feed(std::string_view text, std::string& reasoning, std::string& content);
  // The reply ended: appends what was held back.
  void finish(std::string& reasoning, std::string& content);
  bool in_reasoning() const { return state_ == State::Reasoning; }

 private:
  enum class State { Start, Reasoning, Content };
  State state_;
  bool strip_newlines_ = true;  // at the start of the reasoning, or of the content after it
  std::string held_;
};

}  // namespace nanoinfer
