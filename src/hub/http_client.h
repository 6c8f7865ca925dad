// HTTP(S) GETs over libcurl for the hub client: redirects followed (the hub answers a file's
// URL with a 302 to its content server), the token sent only to the hub's own host, resumable
// downloads with Range, and every failure returned for the caller to word, never printed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace nanoinfer::hub {

struct HttpResult {
  long status = 0;                             // the final response's status; 0 when none came
  std::map<std::string, std::string> headers;  // the final response's headers, names lower-case
  std::string body;                            // get_text's body, or the start of an error response
  int transfer_error = 0;                      // libcurl's code for a failed transfer, 0 when it completed
  std::string transfer_message;                // and its description
};

// Receives a successful (2xx) response's body in pieces, with the response's status; returns
// false to abort the transfer (a write error the caller keeps the reason of).
using BodySink = std::function<bool(long status, std::string_view bytes)>;

class HttpClient {
 public:
  // `token`, when not empty, is sent as "Authorization: Bearer TOKEN". libcurl sends a custom
  // Authorization header only to the host of the URL asked for, never to a host a redirect
  // leads to, so the content server never sees it.
  explicit HttpClient(std::string token);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // The whole body of `url` (at most max_bytes, else a transfer error).
  HttpResult get_text(const std::string& url, size_t max_bytes);

  // GETs `url` from byte `offset` on (a Range request when offset > 0; a server that ignores it
  // answers 200 with the whole body, which the sink sees by the status) and hands a 2xx body to
  // `sink`. An error response's body goes to HttpResult::body instead (its start only).
  HttpResult download(const std::string& url, uint64_t offset, const BodySink& sink);

 private:
  HttpResult perform(const std::string& url, uint64_t offset, const BodySink& sink);
  void* curl_;
  std::string token_;
};

// `text` with every byte but the unreserved ones (and '/' when keep_slash) percent-encoded.
std::string url_escape(std::string_view text, bool keep_slash);

}  // namespace nanoinfer::hub
