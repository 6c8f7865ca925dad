// `nanoinfer chat`: an interactive conversation on the chat template. One line of input is one
// user turn; the reply streams to stdout. /reset starts over, /exit or end of input ends it.
// The "> " prompt goes to stderr and only when stdin is a terminal, so a pipe gets replies only.
// A failed turn is reported on stderr and the chat goes on, but the exit code is then 1.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "command.h"
#include "output.h"
#include "common_options.h"
#include "nanoinfer/chat_session.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer::cli {
namespace {

struct ChatFlags {
  ModelFlags model;
  SamplingOverrides sampling;
  std::string system;
  bool special = false;
  int64_t n_predict = 512;
  GrammarFlags grammar;
  bool verbose = false;
};

// Replies stream as they are generated, so each piece is flushed (and checked) at once.
void write_stdout(std::string_view text) {
  write_out(text);
  flush_out();
}

void run(const ChatFlags& f) {
  require_non_negative(f.n_predict, "-n");
  OpenedModel m = load_model(f.model);
  const SamplingSettings sampling = resolve_sampling(m.generation, f.sampling);
  StopRules options;
  options.max_new_tokens = f.n_predict;
  options.eos_ids = stop_token_ids(m.generation, m.tokenizer, /*chat=*/true);
  if (options.eos_ids.empty()) fail("{}: the tokenizer has no <|im_end|> token, so a chat turn could never end", m.dir.string());

  Generator generator(m.model, m.tokenizer, sampling.params());
  // Each reply is constrained on its own: the grammar restarts with every turn.
  if (auto g = grammar_processor(f.grammar, m.tokenizer, options.eos_ids)) generator.add_processor(std::move(g));
  ChatSession session(generator, m.tokenizer, f.system,
                      f.special ? SpecialTokens::Parse : SpecialTokens::AsText);
  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  if (f.verbose) fmt::print(stderr, "{}", sampling.describe());
  if (interactive) {
    fmt::print(stderr, "chat with {} (load {:.2f} s); /reset starts over, /exit or Ctrl-D ends\n",
               m.dir.string(), m.load_seconds);
  }

  // Lines are capped (kMaxLineBytes), so `chat < /dev/zero` fails instead of eating memory.
  LineReader input("-");
  std::string line;
  size_t failed_turns = 0;
  while (true) {
    if (interactive) {
      std::fputs("> ", stderr);
      std::fflush(stderr);
    }
    if (!input.next(line)) break;
    if (line == "/exit") break;
    if (line == "/reset") {
      session.reset();
      if (interactive) fmt::print(stderr, "(conversation reset)\n");
      continue;
    }
    if (line.empty()) continue;
    try {
      const GenerationStats s = session.send(line, options, write_stdout);
      write_stdout("\n");
      if (f.verbose) {
        const std::span<const int32_t> all = generator.tokens();
        const size_t reply_start = all.size() - s.generated_tokens;
        fmt::print(stderr, "[context ids: {}]\n[reply ids: {}]\n", fmt::join(all.first(reply_start), " "),
                   fmt::join(all.subspan(reply_start), " "));
        fmt::print(stderr, "[prefill {} tokens, {:.1f} tok/s | {} tokens, {:.2f} tok/s | {} | context {}/{}]\n",
                   s.prompt_tokens, s.prefill_tokens_per_second(), s.generated_tokens,
                   s.decode_tokens_per_second(), stop_reason_name(s.stop_reason),
                   generator.tokens().size(), generator.context_size());
      }
    } catch (const Error& e) {
      if (std::ferror(stdout)) throw;  // no one can read the replies: end the chat
      // The conversation is unchanged (or reset, if the reply failed part way): the user can
      // /reset or send something shorter. The exit code still reports the failure.
      fmt::print(stderr, "nanoinfer: error: {}\n", e.what());
      ++failed_turns;
    }
  }
  // Each failure was reported as it happened; exit 1 without repeating it (CLI11's
  // RuntimeError carries an exit code and no message).
  if (failed_turns > 0) throw CLI::RuntimeError(1);
}

void setup(CLI::App& app) {
  auto f = std::make_shared<ChatFlags>();
  add_model_flags(app, f->model);
  add_sampling_flags(app, f->sampling);
  app.add_option("--system", f->system, "System prompt (default: the chat template's)");
  app.add_flag("--special", f->special,
               "Parse special-token text typed in a message (e.g. <|im_end|>) as the special token. "
               "By default it is plain text, so a message cannot end its turn or forge another");
  app.add_option("-n,--n-predict", f->n_predict, "Maximum tokens per reply (default 512)");
  add_grammar_flags(app, f->grammar);
  app.add_flag("--verbose", f->verbose, "Print settings and per-turn statistics to stderr");
  app.callback([f] { run(*f); });
}

const bool registered = register_command(
    {"", "chat", "Interactive multi-turn chat (reads stdin; works from a pipe)", setup});

}  // namespace
}  // namespace nanoinfer::cli
