// A minimal HTTP/1.0 responder for `nanoinfer viz`: one page on 127.0.0.1, one thread that
// polls up to 32 connections (each has 10 s for its request head, so an idle or slow one
// never blocks the others), no keep-alive. It serves a local debugging view to the person who
// started it, nothing more (no TLS, no concurrency, no routing beyond "/").
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace nanoinfer::cli {

// Listens on 127.0.0.1:`port` (0 = any free port), calls `on_listening` with the bound port,
// then answers GET / (and /index.html) with `html`, anything else with 404, other methods
// with 405. Returns after `max_requests` requests (0 = never). Throws Error if the port
// cannot be bound.
void serve_html(std::string_view html, int port, const std::function<void(int port)>& on_listening,
                uint64_t max_requests = 0);

}  // namespace nanoinfer::cli
