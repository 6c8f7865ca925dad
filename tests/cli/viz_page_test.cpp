// The viz page renderer (src/cli/viz_page.cpp): the page is one file with the stylesheet, the
// script and the trace inlined, nothing left to fetch, and a trace whose strings hold HTML
// still comes back out of the page unchanged. The fixture trace is checked against the format.
// VizPage.RendersFixture also writes the page for the browser test (tests/browser/).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/viz_page.h"
#include "nanoinfer/error.h"
#include "support/files.h"
#include "support/viz_trace.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTraceOpen = R"(<script id="trace" type="application/json">)";

std::string fixture_text() {
  return test::read_text(fs::path(NANOINFER_SOURCE_DIR) / "tests/data/viz/trace.json");
}

size_t count(std::string_view text, std::string_view needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The text of the trace element, as the browser's parser would delimit it: up to the first
// "</script" after the opening tag.
std::string embedded_trace(const std::string& page) {
  const size_t open = page.find(kTraceOpen);
  if (open == std::string::npos) return "";
  const size_t begin = open + kTraceOpen.size();
  return page.substr(begin, page.find("</script", begin) - begin);
}

TEST(VizPage, FixtureTraceHasTheDocumentedFormat) {
  const auto trace = nlohmann::json::parse(fixture_text());
  EXPECT_EQ(test::viz_trace_problem(trace), "");
  // The checker can fail: a row that no longer sums to 1, a race that pushed one position too many.
  auto broken = trace;
  broken["steps"][2]["attention"][1][0][0] = 0.9;
  EXPECT_NE(test::viz_trace_problem(broken).find("steps[2].attention[1][0]: sums to"), std::string::npos);
  broken = trace;
  broken["race"]["cached"]["steps"][3]["positions"] = 2;
  EXPECT_EQ(test::viz_trace_problem(broken), "race.cached.steps[3].positions: expected 1");
}

TEST(VizPage, RendersFixture) {
  const std::string trace = fixture_text();
  const std::string page = cli::render_viz_page(trace);
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  // Everything inline: no link or script source left to fetch, no URL of any scheme.
  EXPECT_EQ(page.find("href=\"viz.css\""), std::string::npos);
  EXPECT_EQ(page.find("src=\"viz.js\""), std::string::npos);
  EXPECT_EQ(page.find("/*TRACE*/"), std::string::npos);
  EXPECT_EQ(page.find("://"), std::string::npos);
  EXPECT_EQ(count(page, "<style>"), 1u);
  EXPECT_NE(page.find("#heat .cell {"), std::string::npos);                          // viz.css
  EXPECT_NE(page.find("function sampleChain(top, history, s)"), std::string::npos);  // viz.js
  EXPECT_EQ(count(page, kTraceOpen), 1u);
  EXPECT_EQ(nlohmann::json::parse(embedded_trace(page)), nlohmann::json::parse(trace));

  // For the browser test: CTest's viz_fixture_page runs this case with the output path set.
  // Beside the page, one whose trace has a version the page does not read, for its error path.
  if (const char* out = std::getenv("NANOINFER_VIZ_FIXTURE_OUT")) {
    fs::create_directories(fs::path(out).parent_path());
    test::write_text(out, page);
    auto future = nlohmann::json::parse(trace);
    future["version"] = 2;
    test::write_text(fs::path(out).replace_filename("viz_unsupported.html"), cli::render_viz_page(future.dump()));
  }
}

TEST(VizPage, HtmlInTraceStringsCannotEndTheScriptElement) {
  const std::string hostile = "</script><script>alert(1)</script> <!-- <SCRIPT> </Script x";
  nlohmann::json trace = nlohmann::json::parse(fixture_text());
  trace["settings"]["prompt"] = hostile;
  trace["prompt"][0]["piece"] = hostile;
  const std::string page = cli::render_viz_page(trace.dump());
  // Only the two script elements' own closing tags remain (the trace's and the inlined JS's).
  EXPECT_EQ(count(page, "</script>"), 2u);
  EXPECT_EQ(page.find("<!--", page.find(kTraceOpen)), std::string::npos);
  const auto back = nlohmann::json::parse(embedded_trace(page));
  EXPECT_EQ(back["settings"]["prompt"], hostile);
  EXPECT_EQ(back, trace);
}

TEST(VizPage, RejectsATraceThatIsNotJson) {
  for (const std::string_view bad : {"", "{\"steps\": [", "<html>", "{} trailing"}) {
    try {
      cli::render_viz_page(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("viz: the trace is not valid JSON"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace nanoinfer
