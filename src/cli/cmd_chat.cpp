// `nanoinfer chat`: an interactive conversation on the chat template. One line of input is one
// user turn (a line ending in a backslash continues on the next); the reply streams to stdout.
// /reset starts over, /help lists the commands, /exit or end of input ends it. Ctrl-C during a
// reply stops the reply and returns to the prompt; at the prompt it ends the chat. When the
// conversation outgrows the context the oldest turns are dropped (the system prompt stays),
// with one line on stderr. The "> " prompt goes to stderr and only when stdin is a terminal,
// so a pipe gets replies only. A message too long for the context is refused with one line on
// stderr (one longer than ChatSession::max_message_bytes() before it is tokenized), and the
// chat goes on. A failed turn is reported on stderr and the chat goes on, but the exit code is
// then 1.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>

#include "command.h"
#include "common_options.h"
#include "line_input.h"
#include "nanoinfer/chat_session.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/reasoning.h"
#include "output.h"
#include "speculation_options.h"

namespace nanoinfer::cli {
namespace {

struct ChatFlags {
  ModelFlags model;
  SamplingOverrides sampling;
  std::string system;
  bool special = false;
  int64_t n_predict = 0;  // 0: until the reply ends or the context is full
  GrammarFlags grammar;
  SpeculationFlags speculation;
  bool verbose = false;
  std::string reasoning = "show";
};

// SIGINT while a reply is generated stops the reply (the generation step reads the flag);
// otherwise it ends the process as usual. Only lock-free atomics and async-signal-safe calls.
std::atomic<bool> replying{false};
std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) {
  if (replying.load()) {
    interrupted.store(true);
    return;
  }
  ::signal(SIGINT, SIG_DFL);
  ::raise(SIGINT);
}

constexpr std::string_view kHelp =
    "  /help    this list\n"
    "  /reset   start the conversation over (the system prompt stays)\n"
    "  /exit    end the chat (so does Ctrl-D, or Ctrl-C at the prompt)\n"
    "  Ctrl-C during a reply stops it; end a line with \\ to continue the message on the next line\n";

// A reply with a reasoning model's think block left out of stdout: the answer streams as it
// comes; while the model thinks, a terminal shows "(thinking...)" on stderr.
GenerationStats send_hiding_reasoning(ChatSession& session, std::string_view line, const StopRules& options,
                                      bool interactive) {
  ReasoningSplitter splitter;
  std::string reasoning, content;
  bool told = false;
  const auto pass = [&] {
    if (interactive && !told && splitter.in_reasoning()) {
      fmt::print(stderr, "(thinking...)\n");
      told = true;
    }
    write_stdout(content);
    reasoning.clear();
    content.clear();
  };
  GenerationStats s = session.send(line, options, [&](std::string_view text) {
    splitter.feed(text, reasoning, content);
    pass();
  });
  splitter.finish(reasoning, content);
  pass();
  return s;
}

void run(const ChatFlags& f) {
  require_non_negative(f.n_predict, "-n");
  Speculation speculation(f.speculation);
  OpenedModel m = load_model(f.model);
  speculation.load(f.model, m);
  const SamplingSettings sampling = resolve_sampling(m.generation, f.sampling);
  StopRules options;
  options.max_new_tokens = f.n_predict > 0 ? f.n_predict : std::numeric_limits<int64_t>::max();
  options.interrupt = &interrupted;
  options.eos_ids = stop_token_ids(m.generation, m.tokenizer, /*chat=*/true);
  if (options.eos_ids.empty())
    fail("{}: the tokenizer has no <|im_end|> token, so a chat turn could never end", m.dir.string());

  Generator generator(m.model, m.tokenizer, sampling.params());
  // Each reply is constrained on its own: the grammar restarts with every turn.
  if (auto g = grammar_processor(f.grammar, m.tokenizer, options.eos_ids)) generator.add_processor(std::move(g));
  speculation.attach(generator, m, sampling.params());
  ChatSession session(generator, m.tokenizer, f.system, f.special ? SpecialTokens::Parse : SpecialTokens::AllAsText);
  session.set_enable_thinking(f.reasoning != "off");
  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  if (f.verbose) fmt::print(stderr, "{}", sampling.describe());
  if (interactive) {
    fmt::print(stderr, "chat with {} (load {:.2f} s, context {}); /help lists the commands, /exit or Ctrl-D ends\n",
               m.dir.string(), m.load_seconds, generator.context_size());
  }
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);

  // Lines are capped (kMaxLineBytes), so `chat < /dev/zero` fails instead of eating memory.
  // On a terminal: line editing and history (line_input.h).
  LineInput input(interactive, default_history_file());
  std::string line;
  size_t failed_turns = 0;
  while (true) {
    if (!input.next(line, "> ")) break;
    // A trailing backslash continues the message on the next line. Past the longest message
    // the session can take, the rest is read but not kept: the message is refused anyway.
    std::string more;
    for (bool continued = !line.empty() && line.back() == '\\'; continued;) {
      line.back() = '\n';
      if (!input.next(more, ". ")) break;
      continued = !more.empty() && more.back() == '\\';
      if (line.size() <= session.max_message_bytes()) line += more;
    }
    if (line == "/exit") break;
    if (line == "/help") {
      fmt::print(stderr, "{}", kHelp);
      continue;
    }
    if (line == "/reset") {
      session.reset();
      if (interactive) fmt::print(stderr, "(conversation reset)\n");
      continue;
    }
    if (line.empty()) continue;
    try {
      interrupted.store(false);
      replying.store(true);
      GenerationStats s;
      try {
        s = f.reasoning == "hide" ? send_hiding_reasoning(session, line, options, interactive)
                                  : session.send(line, options, write_stdout);
      } catch (...) {
        replying.store(false);
        throw;
      }
      replying.store(false);
      write_stdout("\n");
      if (session.dropped_turns() > 0) {
        fmt::print(stderr, "(the conversation outgrew the context of {} tokens: dropped its {} oldest turn{})\n",
                   generator.context_size(), session.dropped_turns(), session.dropped_turns() == 1 ? "" : "s");
      }
      if (s.stop_reason == StopReason::Interrupted) fmt::print(stderr, "(reply stopped)\n");
      if (s.stop_reason == StopReason::ContextFull) {
        fmt::print(stderr, "(the reply filled the context; the next turn drops the oldest ones)\n");
      }
      if (f.verbose) {
        const std::span<const int32_t> all = generator.tokens();
        const size_t reply_start = all.size() - s.generated_tokens;
        fmt::print(stderr, "[context ids: {}]\n[reply ids: {}]\n", fmt::join(all.first(reply_start), " "),
                   fmt::join(all.subspan(reply_start), " "));
        fmt::print(stderr, "[prefill {} tokens, {:.1f} tok/s | {} tokens, {:.2f} tok/s | {} | context {}/{}]\n",
                   s.prompt_tokens, s.prefill_tokens_per_second(), s.generated_tokens, s.decode_tokens_per_second(),
                   stop_reason_name(s.stop_reason), generator.tokens().size(), generator.context_size());
        if (speculation.enabled()) fmt::print(stderr, "[{}]\n", speculation.stats_line(s));
      }
    } catch (const ChatTurnRefused& e) {
      // Too long for the context: nothing was sent or changed, and the next message may fit.
      fmt::print(stderr, "nanoinfer: {}\n", e.what());
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

void setup_chat(CLI::App& app) {
  auto f = std::make_shared<ChatFlags>();
  add_model_flags(app, f->model);
  add_sampling_flags(app, f->sampling);
  app.add_option("--system", f->system, "System prompt (default: the chat template's)");
  app.add_flag("--special", f->special,
               "Parse added-token text typed in a message (e.g. <|im_end|>, <tool_call>) as the token. "
               "By default it is plain text, so a message cannot end its turn or forge another");
  app.add_option("-n,--n-predict", f->n_predict,
                 "Maximum tokens per reply (default 0: until the reply ends or the context is full)");
  add_grammar_flags(app, f->grammar);
  add_speculation_flags(app, f->speculation);
  app.add_flag("--verbose", f->verbose, "Print settings and per-turn statistics to stderr");
  app.add_option("--reasoning", f->reasoning,
                 "A reasoning model's thinking (Qwen3's <think> block): show (printed with the reply), hide "
                 "(the model thinks; only the answer is printed) or off (the model answers without thinking). "
                 "Default show")
      ->check(CLI::IsMember({"show", "hide", "off"}))
      ->type_name("MODE");
  app.callback([f] { run(*f); });
}

const bool registered_chat =
    register_command({"", "chat", "Interactive multi-turn chat (reads stdin; works from a pipe)", setup_chat});

}  // namespace
}  // namespace nanoinfer::cli
