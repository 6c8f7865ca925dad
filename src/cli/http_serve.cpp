#include "http_serve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "nanoinfer/error.h"

namespace nanoinfer::cli {
namespace {

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return;  // the client went away: nothing to tell it
    data.remove_prefix(static_cast<size_t>(sent));
  }
}

// The request line and headers, up to the blank line (bodies are not read: GET has none).
std::string read_head(int fd) {
  std::string head;
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos &&
         head.size() < 16384) {
    const ssize_t got = ::recv(fd, buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    head.append(buf, static_cast<size_t>(got));
  }
  return head;
}

void respond(int fd, std::string_view status, std::string_view type, std::string_view body) {
  send_all(fd, fmt::format("HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
                           "Connection: close\r\n\r\n",
                           status, type, body.size()));
  send_all(fd, body);
}

}  // namespace

void serve_html(std::string_view html, int port, const std::function<void(int port)>& on_listening,
                uint64_t max_requests) {
  if (port < 0 || port > 65535) fail("--port must be in [0, 65535], got {}", port);
  Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
  if (listener.fd < 0) fail("cannot create a socket: {}", std::strerror(errno));
  const int yes = 1;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(listener.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    fail("cannot listen on 127.0.0.1:{}: {} (choose another --port, or 0 for any free one)", port, std::strerror(errno));
  }
  if (::listen(listener.fd, 16) != 0) fail("cannot listen on 127.0.0.1:{}: {}", port, std::strerror(errno));
  socklen_t len = sizeof addr;
  ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len);
  on_listening(ntohs(addr.sin_port));

  for (uint64_t served = 0; max_requests == 0 || served < max_requests;) {
    Fd client(::accept(listener.fd, nullptr, nullptr));
    if (client.fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      fail("accept failed: {}", std::strerror(errno));
    }
    const std::string head = read_head(client.fd);
    if (head.empty()) continue;  // a connection closed without a request
    ++served;
    const std::string_view line = std::string_view(head).substr(0, head.find_first_of("\r\n"));
    const size_t sp1 = line.find(' ');
    const std::string_view method = line.substr(0, sp1);
    std::string_view target = sp1 == std::string_view::npos ? "" : line.substr(sp1 + 1);
    target = target.substr(0, target.find(' '));
    target = target.substr(0, target.find('?'));
    if (method != "GET") {
      respond(client.fd, "405 Method Not Allowed", "text/plain; charset=utf-8", "only GET\n");
    } else if (target == "/" || target == "/index.html") {
      respond(client.fd, "200 OK", "text/html; charset=utf-8", html);
    } else {
      respond(client.fd, "404 Not Found", "text/plain; charset=utf-8", "not found: the page is at /\n");
    }
  }
}

}  // namespace nanoinfer::cli
