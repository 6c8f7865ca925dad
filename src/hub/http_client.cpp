#include "hub/http_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "nanoinfer/error.h"

namespace nanoinfer::hub {

namespace {

// What libcurl's callbacks write into during one transfer.
struct Transfer {
  CURL* curl = nullptr;
  HttpResult* result = nullptr;
  const BodySink* sink = nullptr;
  bool aborted = false;
};

constexpr size_t kErrorBodyBytes = 4096;

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  // Each response of a redirect chain starts with its status line: keep the last one's headers.
  if (line.starts_with("HTTP/")) t->result->headers.clear();
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.remove_suffix(1);
    t->result->headers[name] = std::string(value);
  }
  return size * count;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    std::string& body = t->result->body;
    body.append(data, std::min(n, kErrorBodyBytes - std::min(kErrorBodyBytes, body.size())));
    return n;
  }
  if (!(*t->sink)(status, std::string_view(data, n))) {
    t->aborted = true;
    return 0;  // libcurl ends the transfer with CURLE_WRITE_ERROR
  }
  return n;
}

void global_init_once() {
  static const bool done = [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) fail("libcurl failed to initialize");
    return true;
  }();
  (void)done;
}

}  // namespace

HttpClient::HttpClient(std::string token) : curl_(nullptr), token_(std::move(token)) {
  global_init_once();
  curl_ = curl_easy_init();
  if (curl_ == nullptr) fail("libcurl failed to create a transfer handle");
}

HttpClient::~HttpClient() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

HttpResult HttpClient::get_text(const std::string& url, size_t max_bytes) {
  HttpResult r;
  std::string text;
  const BodySink collect = [&](long, std::string_view bytes) {
    if (text.size() + bytes.size() > max_bytes) return false;
    text.append(bytes);
    return true;
  };
  r = perform(url, 0, collect);
  if (r.transfer_error == CURLE_WRITE_ERROR)
    r.transfer_message = fmt::format("the response exceeds {} bytes", max_bytes);
  if (r.status >= 200 && r.status < 300) r.body = std::move(text);
  return r;
}

HttpResult HttpClient::download(const std::string& url, uint64_t offset, const BodySink& sink) {
  return perform(url, offset, sink);
}

HttpResult HttpClient::perform(const std::string& url, uint64_t offset, const BodySink& sink) {
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);
  HttpResult result;
  Transfer t{curl, &result, &sink};
  char error[CURL_ERROR_SIZE] = {};
  curl_slist* headers = nullptr;
  if (!token_.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + token_).c_str());
  const std::string range = fmt::format("{}-", offset);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "nanoinfer/" NANOINFER_VERSION);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  // A server that stops sending ends the transfer after a minute instead of hanging pull.
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  if (offset > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    result.transfer_error = static_cast<int>(code);
    result.transfer_message = error[0] != '\0' ? error : curl_easy_strerror(code);
  }
  return result;
}

std::string url_escape(std::string_view text, bool keep_slash) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

}  // namespace nanoinfer::hub
