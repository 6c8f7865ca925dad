#include "support/viz_trace.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace nanoinfer::test {
namespace {

// Thrown (and caught below) with the first problem, so each check is one line.
struct Problem {
  std::string what;
};

void check(bool ok, const std::string& what) {
  if (!ok) throw Problem{what};
}

const nlohmann::json& field(const nlohmann::json& object, const char* name, const std::string& where) {
  check(object.is_object() && object.contains(name), fmt::format("{}: missing \"{}\"", where, name));
  return object.at(name);
}

int64_t integer(const nlohmann::json& object, const char* name, const std::string& where) {
  const auto& v = field(object, name, where);
  check(v.is_number_integer(), fmt::format("{}.{}: not an integer", where, name));
  return v.get<int64_t>();
}

double number(const nlohmann::json& object, const char* name, const std::string& where) {
  const auto& v = field(object, name, where);
  check(v.is_number(), fmt::format("{}.{}: not a number", where, name));
  return v.get<double>();
}

// {"id", "piece"} with the id inside the vocabulary; returns the id.
int64_t token(const nlohmann::json& t, int64_t vocab, const std::string& where) {
  const int64_t id = integer(t, "id", where);
  check(id >= 0 && id < vocab, fmt::format("{}.id: {} outside [0, {})", where, id, vocab));
  check(field(t, "piece", where).is_string(), fmt::format("{}.piece: not a string", where));
  return id;
}

void check_trace(const nlohmann::json& trace, double tolerance) {
  check(field(trace, "format", "trace") == "nanoinfer-viz-trace", "trace.format: not \"nanoinfer-viz-trace\"");
  check(integer(trace, "version", "trace") == 1, "trace.version: not 1");

  const auto& settings = field(trace, "settings", "trace");
  for (const char* name : {"model", "prompt"}) {
    check(field(settings, name, "settings").is_string(), fmt::format("settings.{}: not a string", name));
  }
  const int64_t n = integer(settings, "n", "settings");
  integer(settings, "top_k", "settings");
  const auto& seed = field(settings, "seed", "settings");
  check(seed.is_string() && !seed.get<std::string>().empty() &&
            seed.get<std::string>().find_first_not_of("0123456789") == std::string::npos,
        "settings.seed: not a string of decimal digits");
  for (const char* name : {"temperature", "top_p", "min_p", "repetition_penalty"}) number(settings, name, "settings");

  const auto& model = field(trace, "model", "trace");
  const int64_t layers = integer(model, "n_layers", "model"), heads = integer(model, "n_heads", "model");
  const int64_t vocab = integer(model, "vocab_size", "model");
  check(layers > 0 && heads > 0 && vocab > 0 && integer(model, "n_kv_heads", "model") > 0, "model: sizes must be > 0");

  const auto& prompt = field(trace, "prompt", "trace");
  check(prompt.is_array() && !prompt.empty(), "trace.prompt: not a non-empty array");
  for (size_t j = 0; j < prompt.size(); ++j) token(prompt[j], vocab, fmt::format("prompt[{}]", j));
  const size_t P = prompt.size();

  const auto& steps = field(trace, "steps", "trace");
  check(steps.is_array() && !steps.empty() && std::ssize(steps) <= n, "trace.steps: not 1 .. settings.n steps");
  std::vector<int64_t> chosen;
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string at = fmt::format("steps[{}]", i);
    chosen.push_back(token(field(steps[i], "chosen", at), vocab, at + ".chosen"));
    const double rest = number(steps[i], "rest_mass", at);
    check(rest >= 0.0 && rest <= 1.0, at + ".rest_mass: outside [0, 1]");
    const auto& top = field(steps[i], "top", at);
    check(top.is_array() && !top.empty() && top.size() <= 40, at + ".top: not 1 .. 40 candidates");
    std::set<int64_t> ids;
    for (size_t c = 0; c < top.size(); ++c) {
      const std::string where = fmt::format("{}.top[{}]", at, c);
      check(ids.insert(token(top[c], vocab, where)).second, where + ": id repeated");
      check(c == 0 || number(top[c], "logit", where) <= number(top[c - 1], "logit", where),
            where + ": logits not descending");
    }
    const auto& attention = field(steps[i], "attention", at);
    check(attention.is_array() && std::ssize(attention) == layers, at + ".attention: not n_layers rows");
    for (int64_t l = 0; l < layers; ++l) {
      check(attention[l].is_array() && std::ssize(attention[l]) == heads,
            fmt::format("{}.attention[{}]: not n_heads rows", at, l));
      for (int64_t h = 0; h < heads; ++h) {
        const auto& row = attention[l][h];
        const std::string where = fmt::format("{}.attention[{}][{}]", at, l, h);
        check(row.is_array() && row.size() == P + i, fmt::format("{}: expected {} weights", where, P + i));
        double sum = 0.0;
        for (const auto& w : row) {
          check(w.is_number() && w.get<double>() >= 0.0 && w.get<double>() <= 1.0, where + ": weight outside [0, 1]");
          sum += w.get<double>();
        }
        check(std::abs(sum - 1.0) <= tolerance, fmt::format("{}: sums to {}", where, sum));
      }
    }
  }

  const auto& race = field(trace, "race", "trace");
  for (const char* name : {"cached", "uncached"}) {
    const auto& run = field(race, name, "race");
    const std::string where = fmt::format("race.{}", name);
    check(field(run, "tokens", where).get<std::vector<int64_t>>() == chosen, where + ".tokens: not the chosen tokens");
    const auto& rsteps = field(run, "steps", where);
    check(rsteps.is_array() && rsteps.size() == steps.size(), where + ".steps: not one per step");
    for (size_t i = 0; i < rsteps.size(); ++i) {
      const std::string at = fmt::format("{}.steps[{}]", where, i);
      // Cached: the prompt once, then one position per step. Recomputed: the whole context.
      const auto expected = std::string_view(name) == "cached" ? (i == 0 ? P : 1) : P + i;
      check(integer(rsteps[i], "positions", at) == static_cast<int64_t>(expected),
            fmt::format("{}.positions: expected {}", at, expected));
      check(number(rsteps[i], "seconds", at) >= 0.0, at + ".seconds: negative");
    }
  }
}

}  // namespace

std::string viz_trace_problem(const nlohmann::json& trace, double row_sum_tolerance) {
  try {
    check_trace(trace, row_sum_tolerance);
  } catch (const Problem& p) {
    return p.what;
  } catch (const nlohmann::json::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace nanoinfer::test
