// Where `chat` reads its lines. On a terminal: libedit (BSD licence, Debian's libedit) with
// emacs-style editing, arrow-key history and a history file; otherwise plain lines from stdin
// (LineReader, capped at kMaxLineBytes), so a pipe behaves as before.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

namespace nanoinfer::cli {

class LineInput {
 public:
  // `history_file` empty: no history kept across runs (editing still works).
  LineInput(bool terminal, std::filesystem::path history_file);
  ~LineInput();
  LineInput(const LineInput&) = delete;
  LineInput& operator=(const LineInput&) = delete;

  // The next line without its '\n'; false at the end of input. On a terminal `prompt` is shown
  // (on stderr) and the line, if not empty, added to the history.
  bool next(std::string& line, const char* prompt);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// $XDG_STATE_HOME/nanoinfer/chat_history, else ~/.local/state/nanoinfer/chat_history; empty
// when neither variable is set. The directory is created when the history is first saved.
std::filesystem::path default_history_file();

}  // namespace nanoinfer::cli
