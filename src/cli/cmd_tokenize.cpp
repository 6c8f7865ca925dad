// `nanoinfer tokenize [-m MODEL_DIR] [-p TEXT | -f FILE] [--ids] [--show-count] [--chat]`
// and the batch mode `--jsonl` (one {"text": ...} object per input line -> one JSON array
// of ids per output line), for inspecting tokenization and tokenizing data sets.
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "command.h"
#include "common_options.h"
#include "nanoinfer/chat_template.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/json_limits.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/tokenizer.h"
#include "output.h"

namespace nanoinfer::cli {
namespace {

struct TokenizeArgs {
  std::string model_dir;
  std::string prompt;
  std::string file;
  bool ids_only = false;
  bool show_count = false;
  bool chat = false;
  bool special = false;
  bool jsonl = false;
};

// How added-token text in a --chat message is encoded: as chat does (plain text unless
// --special).
SpecialTokens message_specials(const TokenizeArgs& args) {
  return args.special ? SpecialTokens::Parse : SpecialTokens::AllAsText;
}

// A token's bytes for display on one line: control bytes escaped (json_limits.h), backslash
// and quote too, since the display quotes each token.
std::string display(std::string_view bytes) {
  return escape_control(bytes, "\\'");
}

void run_jsonl(const Tokenizer& tok, const TokenizeArgs& args) {
  LineReader in(args.file);
  std::vector<int32_t> ids;
  std::string out;
  for (std::string line; in.next(line);) {
    if (line.empty()) continue;
    const std::string where = fmt::format("{} line {}", args.file, in.line_number());
    const nlohmann::json j = parse_json(line, where);
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      fail("{}: expected an object with a string field \"text\"", where);
    }
    ids.clear();
    const std::string& text = j["text"].get_ref<const std::string&>();
    if (args.chat) {
      const ChatMessage message{"user", text};
      ids = encode_chat(tok, {&message, 1}, true, message_specials(args));
    } else {
      tok.encode_append(text, ids);
    }
    out.clear();
    out += '[';
    for (size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(out), "{}{}", i ? "," : "", ids[i]);
    out += "]\n";
    write_out(out);
  }
}

void run(const TokenizeArgs& args) {
  const Tokenizer tok = open_tokenizer(args.model_dir);
  if (args.jsonl) {
    if (!args.prompt.empty()) fail("--jsonl reads -f FILE (or -f - for stdin); it does not take -p");
    if (args.file.empty()) fail("--jsonl needs -f FILE (or -f - for stdin)");
    run_jsonl(tok, args);
    return;
  }
  if (args.prompt.empty() == args.file.empty()) fail("give exactly one of -p TEXT and -f FILE");
  std::string text = args.file.empty() ? args.prompt : read_input_file(args.file);
  std::vector<int32_t> ids;
  if (args.chat) {
    const ChatMessage message{"user", std::move(text)};
    ids = encode_chat(tok, {&message, 1}, true, message_specials(args));
  } else {
    ids = tok.encode(text);
  }
  if (args.ids_only) {
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(out), "{}{}", i ? ", " : "", ids[i]);
    out += "]\n";
    write_out(out);
  } else {
    for (int32_t id : ids) print_out("{:6} -> '{}'\n", id, display(tok.token_bytes(id)));
  }
  if (args.show_count) print_out("Total number of tokens: {}\n", ids.size());
}

const bool registered_tokenize = register_command({
    "",
    "tokenize",
    "Show how a text is tokenized (or tokenize a JSONL data set with --jsonl)",
    [](CLI::App& sub) {
      auto args = std::make_shared<TokenizeArgs>();
      sub.add_option("-m,--model", args->model_dir,
                     "Model directory holding tokenizer.json, or a .gguf file; default: the model built into "
                     "this binary (data/default-model)");
      sub.add_option("-p,--prompt", args->prompt, "Text to tokenize");
      sub.add_option("-f,--file", args->file, "File to tokenize ('-' for stdin)");
      sub.add_flag("--ids", args->ids_only, "Print only the ids, as one JSON array");
      sub.add_flag("--show-count", args->show_count, "Print the number of tokens at the end");
      sub.add_flag(
          "--chat", args->chat,
          "Wrap the text as one user message in the chat template (with the generation prompt) first, "
          "encoded as `chat` would: added-token text (<|im_end|>, <tool_call>) in the message stays plain text");
      sub.add_flag("--special", args->special,
                   "With --chat: parse added-token text (<|im_end|>, <tool_call>) in the message as the token, "
                   "as `chat --special` does. Without --chat special tokens are always parsed");
      sub.add_flag("--jsonl", args->jsonl,
                   "Batch mode: read one {\"text\": ...} object per line of -f FILE, write one JSON array of "
                   "ids per line");
      sub.callback([args] { run(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
