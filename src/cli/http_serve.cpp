#include "http_serve.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

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

// Sends all of `data`, each wait bounded by the socket's send timeout (a client that stops
// reading is dropped).
void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return;  // the client went away or stalled: nothing to tell it
    data.remove_prefix(static_cast<size_t>(sent));
  }
}

void respond(int fd, std::string_view status, std::string_view type, std::string_view body) {
  send_all(fd, fmt::format("HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
                           "Connection: close\r\n\r\n",
                           status, type, body.size()));
  send_all(fd, body);
}

// A connection whose request head is still arriving.
struct Pending {
  int fd;
  std::string head;
  std::chrono::steady_clock::time_point deadline;
};

constexpr size_t kMaxPending = 32;                       // connections read at once; more wait in the backlog
constexpr size_t kMaxHead = 16384;                       // request line + headers
constexpr auto kHeadTimeout = std::chrono::seconds(10);  // for the whole head

bool head_complete(const std::string& head) {
  return head.find("\r\n\r\n") != std::string::npos || head.find("\n\n") != std::string::npos;
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
    fail("cannot listen on 127.0.0.1:{}: {} (choose another --port, or 0 for any free one)", port,
         std::strerror(errno));
  }
  if (::listen(listener.fd, 16) != 0) fail("cannot listen on 127.0.0.1:{}: {}", port, std::strerror(errno));
  socklen_t len = sizeof addr;
  ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len);
  on_listening(ntohs(addr.sin_port));

  // One thread, no blocking read: every connection gets a deadline for its whole head, so an
  // idle one (a browser's preconnect) or a slow one never holds up the others.
  std::vector<Pending> pending;
  std::vector<pollfd> fds;
  uint64_t served = 0;
  const auto answer = [&](Pending& p) {
    const std::string& head = p.head;
    const std::string_view line = std::string_view(head).substr(0, head.find_first_of("\r\n"));
    const size_t sp1 = line.find(' ');
    const std::string_view method = line.substr(0, sp1);
    std::string_view target = sp1 == std::string_view::npos ? "" : line.substr(sp1 + 1);
    target = target.substr(0, target.find(' '));
    target = target.substr(0, target.find('?'));
    // Blocking from here, each send bounded by the send timeout.
    const int flags = ::fcntl(p.fd, F_GETFL);
    ::fcntl(p.fd, F_SETFL, flags & ~O_NONBLOCK);
    const timeval send_timeout{5, 0};
    ::setsockopt(p.fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    if (method != "GET") {
      respond(p.fd, "405 Method Not Allowed", "text/plain; charset=utf-8", "only GET\n");
    } else if (target == "/" || target == "/index.html") {
      respond(p.fd, "200 OK", "text/html; charset=utf-8", html);
    } else {
      respond(p.fd, "404 Not Found", "text/plain; charset=utf-8", "not found: the page is at /\n");
    }
    ++served;
  };
  const auto drop = [](Pending& p) {
    ::close(p.fd);
    p.fd = -1;
  };
  while (max_requests == 0 || served < max_requests) {
    const auto now = std::chrono::steady_clock::now();
    for (Pending& p : pending) {
      if (now >= p.deadline) drop(p);
    }
    std::erase_if(pending, [](const Pending& p) { return p.fd < 0; });
    fds.clear();
    fds.push_back({pending.size() < kMaxPending ? listener.fd : -1, POLLIN, 0});
    auto next = now + std::chrono::seconds(1);
    for (const Pending& p : pending) {
      fds.push_back({p.fd, POLLIN, 0});
      next = std::min(next, p.deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
    const int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 0)) + 1);
    if (r < 0 && errno != EINTR) fail("poll failed: {}", std::strerror(errno));
    if (r <= 0) continue;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (fds[i + 1].revents == 0) continue;
      Pending& p = pending[i];
      char buf[4096];
      const ssize_t got = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (got <= 0) {  // closed without a (whole) request
        drop(p);
        continue;
      }
      p.head.append(buf, static_cast<size_t>(got));
      if (head_complete(p.head) || p.head.size() >= kMaxHead) {
        if (max_requests == 0 || served < max_requests) answer(p);
        drop(p);
      }
    }
    std::erase_if(pending, [](const Pending& p) { return p.fd < 0; });
    if (fds[0].fd >= 0 && fds[0].revents != 0) {
      const int fd = ::accept4(listener.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        pending.push_back({fd, {}, std::chrono::steady_clock::now() + kHeadTimeout});
      } else if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN && errno != EWOULDBLOCK &&
                 errno != EMFILE && errno != ENFILE) {
        fail("accept failed: {}", std::strerror(errno));
      }
    }
  }
  for (Pending& p : pending) drop(p);
}

}  // namespace nanoinfer::cli
