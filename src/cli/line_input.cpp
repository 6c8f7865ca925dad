#include "line_input.h"

#include <histedit.h>

#include <cstdio>
#include <cstdlib>
#include <system_error>

#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer::cli {
namespace {

// libedit asks for the prompt through a callback; the text is kept in the editor's client data.
char* prompt_of(EditLine* el) {
  void* data = nullptr;
  el_get(el, EL_CLIENTDATA, &data);
  return static_cast<char*>(data);
}

}  // namespace

struct LineInput::Impl {
  std::unique_ptr<LineReader> plain;  // not a terminal
  EditLine* el = nullptr;
  History* hist = nullptr;
  std::filesystem::path history_file;
  bool history_saved_once = false;

  ~Impl() {
    if (el) el_end(el);
    if (hist) history_end(hist);
  }

  void save(const std::string& line) {
    HistEvent ev;
    history(hist, &ev, H_ENTER, line.c_str());
    if (history_file.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(history_file.parent_path(), ec);
    // A history that cannot be written is not worth interrupting a chat for: say so once.
    if (history(hist, &ev, H_SAVE, history_file.c_str()) < 0 && !history_saved_once) {
      std::fprintf(stderr, "nanoinfer: warning: cannot write the chat history to %s\n", history_file.c_str());
    }
    history_saved_once = true;
  }
};

LineInput::LineInput(bool terminal, std::filesystem::path history_file) : impl_(std::make_unique<Impl>()) {
  if (!terminal) {
    impl_->plain = std::make_unique<LineReader>("-");
    return;
  }
  impl_->history_file = std::move(history_file);
  impl_->hist = history_init();
  HistEvent ev;
  history(impl_->hist, &ev, H_SETSIZE, 1000);
  history(impl_->hist, &ev, H_SETUNIQUE, 1);  // the same line twice in a row is kept once
  if (!impl_->history_file.empty()) history(impl_->hist, &ev, H_LOAD, impl_->history_file.c_str());
  // Edited text and the prompt go to stderr: stdout carries replies only.
  impl_->el = el_init("nanoinfer", stdin, stderr, stderr);
  if (!impl_->el) fail("chat: cannot start line editing on this terminal");
  el_set(impl_->el, EL_EDITOR, "emacs");
  el_set(impl_->el, EL_SIGNAL, 1);  // the terminal is restored if a signal ends the process
  el_set(impl_->el, EL_PROMPT, prompt_of);
  el_set(impl_->el, EL_HIST, history, impl_->hist);
  el_source(impl_->el, nullptr);  // the user's ~/.editrc, as other libedit programs read it
}

LineInput::~LineInput() = default;

bool LineInput::next(std::string& line, const char* prompt) {
  if (impl_->plain) return impl_->plain->next(line);
  el_set(impl_->el, EL_CLIENTDATA, const_cast<char*>(prompt));
  int count = 0;
  const char* got = el_gets(impl_->el, &count);
  if (got == nullptr || count <= 0) {
    // Ctrl-D: end the prompt's line, so that the shell's prompt starts on a line of its own.
    std::fputc('\n', stderr);
    return false;
  }
  line.assign(got, static_cast<size_t>(count));
  if (!line.empty() && line.back() == '\n') line.pop_back();
  if (line.size() > kMaxLineBytes) fail("chat: a line of {} bytes is over the limit of {}", line.size(), kMaxLineBytes);
  if (!line.empty()) impl_->save(line);
  return true;
}

std::filesystem::path default_history_file() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) {
    return std::filesystem::path(state) / "nanoinfer" / "chat_history";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::filesystem::path(home) / ".local/state/nanoinfer/chat_history";
  }
  return {};
}

}  // namespace nanoinfer::cli
