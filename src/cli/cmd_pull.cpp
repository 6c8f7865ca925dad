// `nanoinfer pull ORG/NAME[@REVISION][:QUANT]`: a model from the Hugging Face hub into the hub
// cache, where `-m ORG/NAME` finds it (nanoinfer/hub_pull.h).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "byte_size.h"
#include "command.h"
#include "nanoinfer/error.h"
#include "nanoinfer/hub_pull.h"
#include "nanoinfer/json_limits.h"
#include "output.h"

namespace nanoinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The progress line on a terminal, redrawn in place at most ten times a second: the file, its
// share done, the rate of this transfer and the time left at that rate. Nothing on a pipe.
class PullBar {
 public:
  void update(const PullProgress& p) {
    const Clock::time_point now = Clock::now();
    if (p.index != index_) {
      if (index_ != 0) std::fputc('\n', stderr);
      index_ = p.index;
      start_ = now;
      last_ = {};
    }
    if (now - last_ < std::chrono::milliseconds(100) && p.done != p.total) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    // The first tenth of a second says nothing about the rate yet.
    const double rate = seconds >= 0.1 ? static_cast<double>(p.done - p.resumed) / seconds : 0;
    std::string eta = "--:--";
    std::string per_second = "--";
    if (rate > 0) {
      per_second = byte_size(static_cast<uint64_t>(rate));
      const auto left = static_cast<uint64_t>(static_cast<double>(p.total - p.done) / rate);
      eta = fmt::format("{}:{:02}", left / 60, left % 60);
    }
    const unsigned percent = p.total == 0 ? 100 : static_cast<unsigned>(p.done * 100 / p.total);
    fmt::print(stderr, "\r{} [{}/{}] {:3}% {} / {}  {}/s  ETA {}\x1b[K", escape_control(p.file), p.index, p.count,
               percent, byte_size(p.done), byte_size(p.total), per_second, eta);
    std::fflush(stderr);
  }
  // Ends the redrawn line, so what follows starts on a line of its own.
  void end() {
    if (index_ != 0) std::fputc('\n', stderr);
    index_ = 0;
  }

 private:
  size_t index_ = 0;
  Clock::time_point start_, last_;
};

void pull(const std::string& text) {
  const ModelRef ref = model_ref_or_fail(text);
  PullOptions options = PullOptions::from_environment();
  auto bar = std::make_shared<PullBar>();
  if (::isatty(STDERR_FILENO) != 0) options.progress = [bar](const PullProgress& p) { bar->update(p); };
  PullResult r;
  try {
    r = pull_model(ref, options);
  } catch (const Error&) {
    bar->end();
    throw;
  }
  bar->end();
  if (r.from_cache_offline) {
    print_out("{}: in the cache (HF_HUB_OFFLINE is set, the hub was not asked): {}\n", ref.text(),
              escape_control(r.model_path.string()));
    return;
  }
  print_out("{}: {} file{}, {} ({} downloaded), commit {}\n  {}\n", ref.text(), r.files.size(),
            r.files.size() == 1 ? "" : "s", byte_size(r.bytes), byte_size(r.downloaded), r.commit,
            escape_control(r.model_path.string()));
  print_out("run it with: nanoinfer chat -m {}\n", ref.text());
}

const bool registered_pull = register_command({
    "",
    "pull",
    "Download a model from the Hugging Face hub into its cache (ORG/NAME[@REVISION][:QUANT])",
    [](CLI::App& sub) {
      auto model = std::make_shared<std::string>();
      sub.add_option("model", *model,
                     "ORG/NAME[@REVISION][:QUANT]: a repository of the hub, a branch, tag or commit (default "
                     "main), and for a GGUF repository the quantization of the file to take (e.g. Q4_K_M)")
          ->required();
      sub.footer(
          "Files go into the hub's own cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), "
          "shared with huggingface-cli; `-m ORG/NAME` on any command then uses them without the network. "
          "An interrupted download resumes where it stopped; each file's checksum is verified.\n"
          "Environment: HF_ENDPOINT (hub URL, default https://huggingface.co), HF_TOKEN (for private or gated "
          "repositories; else the file `huggingface-cli login` wrote), HF_HOME / HF_HUB_CACHE (the cache), "
          "HF_HUB_OFFLINE=1 (no network: only report what the cache holds).");
      sub.callback([model] { pull(*model); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
