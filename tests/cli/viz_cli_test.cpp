// `nanoinfer viz` end to end on the default model (its tokens are generate's, its trace has the
// format of docs/VIZ.md, its files appear atomically, its server answers), and the attention
// tap it reads, directly through the library: each row is a distribution, the one the cached
// pass used is the one a full recomputation gives, and installing the tap changes nothing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "nanoinfer/open_model.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/run_cli.h"
#include "support/viz_trace.h"

namespace nanoinfer {
namespace {

using test::entries;

namespace fs = std::filesystem;
using test::run_cli;

std::vector<int32_t> chosen_ids(const nlohmann::json& trace) {
  std::vector<int32_t> ids;
  for (const auto& step : trace["steps"]) ids.push_back(step["chosen"]["id"].get<int32_t>());
  return ids;
}

TEST(VizCli, GreedyTraceIsGeneratesTokensInTheDocumentedFormat) {
  test::TempDir dir;
  const std::string prompt = "ROMEO:";
  const auto r = run_cli({"viz", "-p", prompt, "-n", "24", "--temp", "0", "--repeat-penalty", "1", "-t", "1", "--out",
                          (dir / "page.html").string(), "--trace", (dir / "trace.json").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + (dir / "page.html").string() + "\n");
  // Only the two files: the temporaries were renamed into place.
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"page.html", "trace.json"}));

  const nlohmann::json trace = nlohmann::json::parse(test::read_text(dir / "trace.json"));
  EXPECT_EQ(test::viz_trace_problem(trace), "");
  EXPECT_EQ(trace["settings"]["temperature"], 0.0);
  EXPECT_EQ(trace["settings"]["repetition_penalty"], 1.0);
  EXPECT_EQ(trace["settings"]["prompt"], prompt);

  // The same tokens as `generate`: its text is the decoded chosen ids, bar an end-of-sequence
  // id the trace shows as its last step and generate does not print.
  const auto g = run_cli({"generate", "-p", prompt, "-n", "24", "--temp", "0", "--repeat-penalty", "1", "-t", "1"});
  ASSERT_EQ(g.status, 0) << g.err;
  const OpenedModel m = open_model("", {.model = {.threads = 1}});
  std::vector<int32_t> ids = chosen_ids(trace);
  const auto& eos = m.generation.eos_token_ids;
  if (ids.size() < 24) {
    ASSERT_TRUE(std::find(eos.begin(), eos.end(), ids.back()) != eos.end()) << "stopped early without EOS";
    ids.pop_back();
  }
  EXPECT_EQ(m.tokenizer.decode(ids) + "\n", g.out);

  // The race: both end at the chosen tokens, with the work each kind of decoding does.
  EXPECT_EQ(trace["race"]["cached"]["tokens"], trace["race"]["uncached"]["tokens"]);
  EXPECT_EQ(trace["race"]["cached"]["tokens"].get<std::vector<int32_t>>(), chosen_ids(trace));
  EXPECT_EQ(trace["prompt"].size(), m.tokenizer.encode(prompt).size());

  // The page inlines this trace (every '<' escaped).
  const std::string page = test::read_text(dir / "page.html");
  EXPECT_NE(page.find("\"format\":\"nanoinfer-viz-trace\""), std::string::npos);
}

TEST(VizCli, SampledRunsAgreeAcrossCachedAndRecomputedDecoding) {
  test::TempDir dir;
  const auto r = run_cli({"viz", "-p", "JULIET:\nO", "-n", "12", "--temp", "1.3", "--top-k", "0", "--seed", "7", "-t",
                          "1", "--out", (dir / "p.html").string(), "--trace", (dir / "t.json").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json trace = nlohmann::json::parse(test::read_text(dir / "t.json"));
  EXPECT_EQ(test::viz_trace_problem(trace), "");
  EXPECT_EQ(trace["settings"]["seed"], "7");
  EXPECT_EQ(trace["settings"]["temperature"], 1.3);
  EXPECT_EQ(trace["race"]["uncached"]["tokens"].get<std::vector<int32_t>>(), chosen_ids(trace));
}

// A seed past 2^53 reaches the page digit for digit (a JSON number would be read by the page as
// the nearest double, ...181786 as ...180000), and --verbose, which --seed's help names, shows it.
TEST(VizCli, A64BitSeedIsCarriedExactlyAndVerboseShowsIt) {
  test::TempDir dir;
  const std::string seed = "9653399782157181786";
  const auto r = run_cli({"viz", "-p", "ROMEO:", "-n", "2", "--seed", seed, "--verbose", "-t", "1", "--out",
                          (dir / "p.html").string(), "--trace", (dir / "t.json").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("seed               = " + seed + " (flag)"), std::string::npos) << r.err;
  const std::string text = test::read_text(dir / "t.json");
  EXPECT_NE(text.find("\"seed\":\"" + seed + "\""), std::string::npos) << text.substr(0, 300);
  EXPECT_NE(test::read_text(dir / "p.html").find("\"seed\":\"" + seed + "\""), std::string::npos);
}

TEST(VizCli, BadFlagsAreOneLineErrorsAndLeaveNoFile) {
  test::TempDir dir;
  const std::string out = (dir / "p.html").string();
  test::expect_one_line_error(run_cli({"viz", "-p", "x", "-n", "0", "--out", out}), "-n must be >= 1");
  test::expect_one_line_error(run_cli({"viz", "-p", "x", "--out", out, "--port", "9"}), "--out and --port");
  test::expect_one_line_error(run_cli({"viz", "-p", "x", "--port", "70000"}), "--port must be in [0, 65535]");
  test::expect_one_line_error(run_cli({"viz", "-p", "x", "--temp", "-1", "--out", out}), "temperature");
  test::expect_one_line_error(run_cli({"viz", "-p", "x", "-m", (dir / "none").string(), "--out", out}), "none");
  test::expect_one_line_error(run_cli({"viz", "-p", "x", "-n", "2", "--out", (dir / "no/such/dir/p.html").string()}),
                              "cannot create a temporary file");
  EXPECT_TRUE(entries(dir.path()).empty());
}

// --out and --trace replace only regular files: a symbolic link, a FIFO or a device at the
// target is refused before anything is written, and left as it was (the rename would have
// replaced it: as root, `--out /dev/null` once replaced the system's /dev/null).
TEST(VizCli, RefusesTargetsThatAreNotRegularFiles) {
  test::TempDir dir;
  test::write_text(dir / "real.html", "keep me");
  fs::create_symlink(dir / "real.html", dir / "link.html");
  ASSERT_EQ(::mkfifo((dir / "fifo.html").c_str(), 0600), 0);
  for (const auto& [flag, target, kind] : {std::tuple{"--out", (dir / "link.html").string(), "a symbolic link"},
                                           std::tuple{"--out", (dir / "fifo.html").string(), "a FIFO"},
                                           std::tuple{"--trace", (dir / "link.html").string(), "a symbolic link"},
                                           std::tuple{"--out", std::string("/dev/null"), "a character device"},
                                           std::tuple{"--out", std::string("/dev/full"), "a character device"},
                                           std::tuple{"--out", dir.path().string(), "a directory"}}) {
    const std::string other = (dir / "other.html").string();
    std::vector<std::string> argv{"viz", "-p", "x", "-n", "1", flag, target};
    if (std::string_view(flag) == "--trace") argv.insert(argv.end(), {"--out", other});
    test::expect_one_line_error(run_cli(argv), std::string(kind) + "; refusing to replace it");
  }
  EXPECT_EQ(test::read_text(dir / "real.html"), "keep me");
  EXPECT_TRUE(fs::is_symlink(dir / "link.html"));
  EXPECT_TRUE(fs::is_fifo(dir / "fifo.html"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"fifo.html", "link.html", "real.html"}));
}

// A port nobody listens on right now (the kernel's choice; released before use).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// GET `target` from 127.0.0.1:port, retrying the connection while the server starts.
std::string http_get(int port, const std::string& target) {
  for (int attempt = 0; attempt < 600; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
      const std::string request = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
      ::send(fd, request.data(), request.size(), 0);
      std::string response;
      char buf[4096];
      for (ssize_t got; (got = ::recv(fd, buf, sizeof buf, 0)) > 0;) response.append(buf, static_cast<size_t>(got));
      ::close(fd);
      return response;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

TEST(VizCli, ServesThePageOnLoopback) {
  const int port = free_port();
  test::CliResult r;
  std::thread server([&] {
    r = run_cli({"viz", "-p", "ROMEO:", "-n", "3", "--temp", "0", "-t", "1", "--port", std::to_string(port),
                 "--max-requests", "2"});
  });
  const std::string missing = http_get(port, "/favicon.ico");
  const std::string page = http_get(port, "/");
  server.join();
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "serving the page at http://127.0.0.1:" + std::to_string(port) + "/ (Ctrl-C to stop)\n");
  EXPECT_EQ(missing.rfind("HTTP/1.0 404 ", 0), 0u) << missing.substr(0, 100);
  ASSERT_EQ(page.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << page.substr(0, 100);
  const size_t body = page.find("\r\n\r\n") + 4;
  EXPECT_NE(page.find("Content-Length: " + std::to_string(page.size() - body) + "\r\n"), std::string::npos);
  EXPECT_NE(page.find("\"format\":\"nanoinfer-viz-trace\"", body), std::string::npos);
}

// ---- the attention tap, through the library ----------------------------------------------------

struct Captured {
  size_t position, n_tokens, dim;
  std::vector<float> data;
};

// Every "attn_weights" event of one forward, by layer.
std::vector<Captured> forward_tapped(const Model& model, Sequence& seq, std::span<const int32_t> tokens,
                                     std::vector<float>* logits = nullptr) {
  std::vector<Captured> events(static_cast<size_t>(model.config().num_hidden_layers));
  size_t seen = 0;
  seq.set_tap([&](const TapEvent& e) {
    if (e.name != "attn_weights") return;
    events.at(static_cast<size_t>(e.layer)) = {e.position, e.n_tokens, e.dim, {e.data, e.data + e.n_tokens * e.dim}};
    ++seen;
  });
  const auto out = model.forward(tokens, seq);
  if (logits) logits->assign(out.begin(), out.end());
  seq.set_tap({});
  EXPECT_EQ(seen, events.size());
  return events;
}

TEST(AttentionTap, RowsAreDistributionsEqualToARecomputation) {
  const OpenedModel m = open_model("", {.model = {.threads = 1}});
  const Model& model = m.model;
  const size_t heads = static_cast<size_t>(model.config().num_attention_heads);
  std::vector<int32_t> tokens = m.tokenizer.encode("ROMEO:\nWhat light");
  const size_t P = tokens.size();
  ASSERT_GE(P, 3u);

  Sequence cached = model.new_sequence();
  std::vector<float> logits, full_logits;
  for (size_t step = 0; step < 6; ++step) {
    // The cached pass (the prompt, then one token per step) and a full pass from an empty cache.
    const size_t begin = step == 0 ? 0 : tokens.size() - 1;
    const auto events = forward_tapped(model, cached, std::span(tokens).subspan(begin), &logits);
    Sequence fresh = model.new_sequence();
    const auto full = forward_tapped(model, fresh, tokens, &full_logits);
    for (size_t l = 0; l < events.size(); ++l) {
      const Captured& e = events[l];
      const size_t keys = e.position + e.n_tokens;
      ASSERT_EQ(e.position, begin);
      ASSERT_EQ(keys, tokens.size());
      ASSERT_EQ(e.dim, heads * keys);
      for (size_t t = 0; t < e.n_tokens; ++t) {
        for (size_t h = 0; h < heads; ++h) {
          const float* row = e.data.data() + t * e.dim + h * keys;
          const size_t visible = e.position + t + 1;
          double sum = 0.0;
          for (size_t j = 0; j < visible; ++j) {
            EXPECT_GE(row[j], 0.0f);
            sum += row[j];
          }
          EXPECT_NEAR(sum, 1.0, 1e-6) << "layer " << l << " head " << h << " row " << t;
          for (size_t j = visible; j < keys; ++j) ASSERT_EQ(row[j], 0.0f) << "weight past the causal limit";
        }
      }
      // The last query's row is bitwise the one the full recomputation gives.
      const Captured& f = full[l];
      ASSERT_EQ(f.dim, e.dim);
      const float* a = e.data.data() + (e.n_tokens - 1) * e.dim;
      const float* b = f.data.data() + (f.n_tokens - 1) * f.dim;
      for (size_t i = 0; i < e.dim; ++i) ASSERT_EQ(a[i], b[i]) << "layer " << l << " step " << step << " at " << i;
    }
    // The tap changes nothing: an untapped full pass gives bitwise the tapped one's logits
    // (and the cached pass the same again).
    Sequence plain = model.new_sequence();
    const auto untapped = model.forward(tokens, plain);
    ASSERT_TRUE(std::equal(untapped.begin(), untapped.end(), full_logits.begin(), full_logits.end()));
    ASSERT_TRUE(std::equal(logits.begin(), logits.end(), full_logits.begin(), full_logits.end()));
    tokens.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
}

}  // namespace
}  // namespace nanoinfer
