// `nanoinfer embed [-m MODEL] [-p TEXT | -f FILE] [--pooling P] [--dimensions N] [--no-normalize]`:
// the embedding of each text (one per line of FILE or stdin, or the one -p) as one JSON line
// {"index", "tokens", "embedding"} on stdout, computed in batches (nanoinfer/embedding.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <memory>

#include "command.h"
#include "common_options.h"
#include "nanoinfer/embedding.h"
#include "nanoinfer/error.h"
#include "nanoinfer/open_model.h"
#include "output.h"

namespace nanoinfer::cli {
namespace {

struct EmbedArgs {
  ModelFlags model;
  std::string prompt;
  bool prompt_given = false;
  std::string file;
  std::string pooling;  // empty: the model's own
  size_t dimensions = 0;
  bool no_normalize = false;
  size_t batch = 32;
};

// The texts: the one -p, or the lines of -f FILE ('-' or no flag: stdin), a trailing newline
// ending the last line rather than starting an empty one; "\r\n" endings lose their "\r".
std::vector<std::string> read_texts(const EmbedArgs& args) {
  if (args.prompt_given) return {args.prompt};
  const std::string all = read_input_file(args.file.empty() ? "-" : args.file);
  std::vector<std::string> texts;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\n', at);
    if (end == std::string::npos) end = all.size();
    std::string line = all.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    texts.push_back(std::move(line));
    at = end + 1;
  }
  return texts;
}

std::string json_line(size_t index, size_t tokens, const std::vector<float>& e) {
  std::string out = fmt::format(R"({{"index":{},"tokens":{},"embedding":[)", index, tokens);
  for (size_t d = 0; d < e.size(); ++d) fmt::format_to(std::back_inserter(out), "{}{}", d ? "," : "", e[d]);
  out += "]}\n";
  return out;
}

void run(const EmbedArgs& args) {
  if (args.batch == 0) fail("--batch must be at least 1");
  std::optional<Pooling> flag;
  if (!args.pooling.empty()) flag = parse_pooling(args.pooling);
  const std::vector<std::string> texts = read_texts(args);
  if (texts.empty()) fail("no text to embed (give -p TEXT, or lines on -f FILE or stdin)");
  const OpenedModel m = load_model(args.model);
  const EmbedOptions options{
      .pooling = resolve_pooling(flag, m.pooling), .normalize = !args.no_normalize, .dimensions = args.dimensions};
  const size_t hidden = static_cast<size_t>(m.model.config().hidden_size);
  if (args.dimensions > hidden) fail("--dimensions {}: the model's embeddings have {}", args.dimensions, hidden);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  size_t tokens = 0;
  for (size_t first = 0; first < texts.size(); first += args.batch) {
    const size_t end = std::min(texts.size(), first + args.batch);
    std::vector<std::vector<int32_t>> inputs;
    for (size_t i = first; i < end; ++i) {
      inputs.push_back(embedding_tokens(m.tokenizer, texts[i]));
      if (inputs.back().empty()) fail("text {} is empty (it encodes to no tokens)", i);
      if (inputs.back().size() > m.model.max_context())
        fail("text {} is {} tokens but the context holds {}", i, inputs.back().size(), m.model.max_context());
    }
    std::vector<std::vector<float>> out;
    try {
      out = embed(m.model, inputs, options);
    } catch (const Error& e) {
      // The engine counts inputs within the batch; the user counts texts.
      fail("texts {}..{}: {}", first, end - 1, e.what());
    }
    std::string lines;
    for (size_t i = 0; i < out.size(); ++i) {
      lines += json_line(first + i, inputs[i].size(), out[i]);
      tokens += inputs[i].size();
    }
    write_out(lines);
    if (tty) {
      const double s = seconds(), eta = s / static_cast<double>(end) * static_cast<double>(texts.size() - end);
      fmt::print(stderr, "\rembed: {} / {} texts, ETA {:.0f} s   ", end, texts.size(), eta);
    }
  }
  if (tty) fmt::print(stderr, "\n");
  const double s = seconds();
  fmt::print(stderr, "embed: {} texts, {} tokens, {} pooling, {} dimensions in {:.2f} s ({:.1f} texts/s)\n",
             texts.size(), tokens, pooling_name(options.pooling), args.dimensions ? args.dimensions : hidden, s,
             static_cast<double>(texts.size()) / std::max(s, 1e-9));
}

const bool registered_embed = register_command({
    "",
    "embed",
    "Embed texts (one per line) as JSON lines {index, tokens, embedding}",
    [](CLI::App& sub) {
      auto args = std::make_shared<EmbedArgs>();
      add_model_flags(sub, args->model);
      CLI::Option* text = sub.add_option_function<std::string>(
          "-p,--prompt",
          [args](const std::string& value) {
            args->prompt = value;
            args->prompt_given = true;
          },
          "One text to embed");
      CLI::Option* file = sub.add_option("-f,--file", args->file,
                                         "Embed each line of this file ('-' for stdin; the default without -p)");
      text->excludes(file);
      sub.add_option("--pooling", args->pooling,
                     "mean, cls (first token) or last (default: the model's own, from 1_Pooling/config.json or "
                     "the GGUF pooling_type; else last)");
      sub.add_option("--dimensions", args->dimensions,
                     "Keep the first N components (Matryoshka), normalised after the cut (default: all)");
      sub.add_flag("--no-normalize", args->no_normalize, "Do not L2-normalise the embeddings");
      sub.add_option("--batch", args->batch,
                     "Texts computed together: one sequence each in the same forward passes (of up to 512 rows)")
          ->capture_default_str();
      sub.callback([args] { run(*args); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
