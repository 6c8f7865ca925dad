// Rendering the viz page: the three placeholders of web/viz/viz.html replaced by the embedded
// stylesheet, script and the escaped trace. The checks that make inlining safe run at compile
// time, on the embedded sources themselves.
#include "viz_page.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "nanoinfer/error.h"
#include "viz_page_assets.h"  // generated: viz_assets::html, css, js

namespace nanoinfer::cli {
namespace {

// What viz.html links to in development (open it beside viz.css and viz.js) and what the
// renderer replaces; the trace element's content is the third.
constexpr std::string_view kCssLink = R"(<link rel="stylesheet" href="viz.css">)";
constexpr std::string_view kJsLink = R"(<script src="viz.js"></script>)";
constexpr std::string_view kTraceSlot = "/*TRACE*/";

constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Occurrences of `needle` in `text`; ignoring ASCII case, as the HTML parser does for tag names.
constexpr size_t count(std::string_view text, std::string_view needle, bool ignore_case = false) {
  const auto same = [ignore_case](char a, char b) { return ignore_case ? ascii_lower(a) == ascii_lower(b) : a == b; };
  size_t n = 0;
  for (size_t i = 0; i + needle.size() <= text.size(); ++i) {
    size_t j = 0;
    while (j < needle.size() && same(text[i + j], needle[j])) ++j;
    if (j == needle.size()) ++n;
  }
  return n;
}
constexpr size_t count_ci(std::string_view text, std::string_view needle) {
  return count(text, needle, true);
}

static_assert(count(viz_assets::html, kCssLink) == 1, "web/viz/viz.html must link viz.css exactly once");
static_assert(count(viz_assets::html, kJsLink) == 1, "web/viz/viz.html must load viz.js exactly once");
static_assert(count(viz_assets::html, kTraceSlot) == 1, "web/viz/viz.html must hold the trace placeholder once");
// Inlined, these would end the <style> / <script> element early (or, for "<!--", make the
// HTML parser look for nested script tags).
static_assert(count_ci(viz_assets::css, "</style") == 0, "web/viz/viz.css must not contain '</style'");
static_assert(count_ci(viz_assets::js, "</script") == 0 && count_ci(viz_assets::js, "<!--") == 0,
              "web/viz/viz.js must not contain '</script' or '<!--'");

// '<' only occurs inside JSON strings, where \u003c means the same character: the result
// parses to the same value and holds no "</script" or "<!--" for the HTML parser to see.
std::string escape_for_script(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 64);
  for (char c : json) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string render_viz_page(std::string_view trace_json) {
  if (!nlohmann::json::accept(trace_json.begin(), trace_json.end())) {
    fail("viz: the trace is not valid JSON ({} bytes)", trace_json.size());
  }
  struct Slot {
    size_t at;
    std::string_view placeholder;
    std::string value;
  };
  const std::string_view html = viz_assets::html;
  std::array<Slot, 3> slots{{
      {html.find(kCssLink), kCssLink, "<style>\n" + std::string(viz_assets::css) + "</style>"},
      {html.find(kJsLink), kJsLink, "<script>\n" + std::string(viz_assets::js) + "</script>"},
      {html.find(kTraceSlot), kTraceSlot, escape_for_script(trace_json)},
  }};
  // One pass over the template in document order, so nothing inserted is searched again.
  std::sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) { return a.at < b.at; });
  std::string page;
  page.reserve(html.size() + viz_assets::css.size() + viz_assets::js.size() + trace_json.size() + 64);
  size_t from = 0;
  for (const Slot& slot : slots) {
    page.append(html.substr(from, slot.at - from));
    page.append(slot.value);
    from = slot.at + slot.placeholder.size();
  }
  page.append(html.substr(from));
  return page;
}

}  // namespace nanoinfer::cli
