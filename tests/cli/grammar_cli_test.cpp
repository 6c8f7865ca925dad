// `generate` / `chat` with --json, --json-schema FILE and --grammar FILE on the default model:
// output that ended by end of sequence is what was asked for; bad schemas and grammars are
// one-line errors naming the problem.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

using test::run_cli;

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(GrammarCli, JsonSchemaOutputValidates) {
  test::TempDir dir;
  const std::string schema = write(dir, "s.json", R"({"type":"object","properties":{"ok":{"type":"boolean"},
      "n":{"type":"integer","minimum":1,"maximum":9}},"required":["ok","n"],"additionalProperties":false})");
  int ended = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    const auto r = run_cli({"generate", "-t", "1", "-p", "JSON:", "--temp", "1", "--seed", std::to_string(seed), "-n",
                            "40", "--json-schema", schema});
    ASSERT_EQ(r.status, 0) << r.err;
    if (r.err.find("end of sequence") == std::string::npos) continue;
    ++ended;
    const auto v = nlohmann::json::parse(r.out);
    EXPECT_EQ(v.size(), 2u);
    EXPECT_TRUE(v.at("ok").is_boolean());
    EXPECT_GE(v.at("n").get<int>(), 1);
    EXPECT_LE(v.at("n").get<int>(), 9);
  }
  EXPECT_GT(ended, 0);
}

TEST(GrammarCli, GrammarFileAndJsonInChat) {
  test::TempDir dir;
  const std::string g = write(dir, "g.gbnf", "root ::= (\"yes\" | \"no\") \"!\"\n");
  const auto r = run_cli({"generate", "-t", "1", "-p", "Q:", "--temp", "1", "--seed", "3", "-n", "10", "--grammar", g});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out == "yes!\n" || r.out == "no!\n") << r.out;
  // Each chat reply is constrained on its own (the grammar restarts every turn).
  const auto c = run_cli({"chat", "-t", "1", "--temp", "1", "--seed", "2", "-n", "20", "--grammar", g}, "hi\nagain\n");
  ASSERT_EQ(c.status, 0) << c.err;
  std::istringstream lines(c.out);
  for (std::string line; std::getline(lines, line);) EXPECT_TRUE(line == "yes!" || line == "no!") << line;
}

TEST(GrammarCli, ErrorsAreOneLineAndNamed) {
  test::TempDir dir;
  const auto bad_schema = run_cli({"generate", "-p", "x", "-n", "1", "--json-schema",
                                   write(dir, "s.json", R"({"type":"string","format":"email"})")});
  EXPECT_EQ(bad_schema.status, 1);
  EXPECT_NE(bad_schema.err.find("'format'"), std::string::npos) << bad_schema.err;
  const auto bad_grammar =
      run_cli({"generate", "-p", "x", "-n", "1", "--grammar", write(dir, "g.gbnf", "root ::= nope\n")});
  EXPECT_EQ(bad_grammar.status, 1);
  EXPECT_NE(bad_grammar.err.find("'nope'"), std::string::npos) << bad_grammar.err;
  const auto both =
      run_cli({"generate", "-p", "x", "-n", "1", "--json", "--grammar", write(dir, "h.gbnf", "root ::= \"a\"\n")});
  EXPECT_EQ(both.status, 1);
  EXPECT_NE(both.err.find("exclude each other"), std::string::npos) << both.err;
}

// The CLI's schemas and grammars have serve's limits: nesting (100,000 levels crashed, 100 were
// blamed on "grammar line 1"), the compile budget and the ambiguity probe, each a line naming
// the file; an empty grammar file is not "no grammar".
TEST(GrammarCli, SchemaAndGrammarLimitsAreOneLineNamingTheFile) {
  test::TempDir dir;
  const auto nested = [](int depth) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += R"({"anyOf":[)";
    s += R"({"type":"integer"})";
    for (int i = 0; i < depth; ++i) s += "]}";
    return s;
  };
  for (int depth : {100, 100000}) {
    const std::string file = write(dir, fmt::format("deep{}.json", depth), nested(depth));
    const auto r = run_cli({"generate", "-p", "x", "-n", "1", "--json-schema", file});
    EXPECT_EQ(r.status, 1) << depth;
    EXPECT_NE(r.err.find("--json-schema " + file + ": JSON Schema: JSON nested deeper than 64 levels"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const auto costly = run_cli({"generate", "-p", "x", "-n", "1", "--json-schema",
                               write(dir, "costly.json", R"({"type":"string","pattern":"^([a-z]*[0-9]*){1,2000}$"})")});
  EXPECT_EQ(costly.status, 1);
  EXPECT_NE(costly.err.find("costly.json: grammar: compiling it takes more than"), std::string::npos) << costly.err;
  const auto ambiguous = run_cli({"generate", "-p", "x", "-n", "1", "--grammar",
                                  write(dir, "amb.gbnf", "root ::= \"a\" root \"b\" | \"a\" root \"c\" | \"\"\n")});
  EXPECT_EQ(ambiguous.status, 1);
  EXPECT_NE(ambiguous.err.find("amb.gbnf: grammar: over 65536 parses at once"), std::string::npos) << ambiguous.err;
  const auto empty = run_cli({"generate", "-p", "x", "-n", "1", "--grammar", write(dir, "empty.gbnf", "\n")});
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.err.find("empty.gbnf: the grammar file is empty"), std::string::npos) << empty.err;
}

// bench generate with a grammar: plain and constrained decoding alternated, and the grammar's
// own costs (the vocabulary trie, compiling per request, the mask per token) in one record.
TEST(GrammarCli, BenchGenerateRecordsWhatTheGrammarCosts) {
  test::TempDir dir;
  const std::string g = write(dir, "g.gbnf", "root ::= (\"yes\" | \"no\") \"!\"\n");
  const std::string results = (dir.path() / "r.jsonl").string();
  const auto r = run_cli({"bench", "generate", "-t", "1", "-p", "8", "-n", "6", "-r", "2", "--probe-mib", "0",
                          "--grammar", g, "--results", results});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the grammar's mask alone"), std::string::npos) << r.out;
  std::istringstream lines(test::read_text(results));
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 3u);  // pp, tg, and the constrained A/B
  const nlohmann::json& c = records[2];
  EXPECT_EQ(c["bench"], "generate-constrained");
  EXPECT_EQ(c["grammar"], "gbnf:" + g);
  EXPECT_EQ(c["n_gen"], 6);
  // "yes!" or "no!" then end of sequence: at least that one decode step, never more than -n.
  EXPECT_GE(c["constrained_decode_steps"].get<int>(), 1);
  EXPECT_LE(c["constrained_decode_steps"].get<int>(), 6);
  for (const char* key : {"vocab_trie_ms", "compile_ms_median", "compile_ms_min", "mask_ms_per_token_median",
                          "mask_ms_per_token_min", "plain_median_ts", "constrained_median_ts"}) {
    ASSERT_TRUE(c.contains(key)) << key;
    EXPECT_GT(c[key].get<double>(), 0.0) << key;
  }
  EXPECT_LE(c["compile_ms_min"].get<double>(), c["compile_ms_median"].get<double>());
  EXPECT_DOUBLE_EQ(c["constrained_ratio"].get<double>(),
                   c["constrained_median_ts"].get<double>() / c["plain_median_ts"].get<double>());
  const auto both = run_cli({"bench", "generate", "-p", "8", "-n", "2", "--json", "--grammar", g});
  EXPECT_EQ(both.status, 1);
  EXPECT_NE(both.err.find("exclude each other"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace nanoinfer
