#include "serve/front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <system_error>

#include "nanoinfer/error.h"
#include "serve/api.h"

namespace nanoinfer::serve {

using Clock = std::chrono::steady_clock;

namespace {

thread_local int current_fd = -1;  // the connection a worker is answering

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

void send_best_effort(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string address_text(const sockaddr_storage& a, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    port = ntohs(v6.sin6_port);
  }
  return text;
}

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

// A connection's stream for httplib: bytes the poller already read come first; reads wait at
// most io_timeout each and never past the request's deadline; writes wait at most io_timeout.
class ConnStream : public httplib::Stream {
 public:
  ConnStream(int fd, std::string buffered, Clock::time_point deadline, std::chrono::milliseconds io)
      : fd_(fd), buffer_(std::move(buffered)), deadline_(deadline), io_ms_(static_cast<int>(io.count())) {}

  bool is_readable() const override { return pos_ < buffer_.size() || wait(POLLIN, read_wait()); }
  bool is_writable() const override { return wait(POLLOUT, io_ms_); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < buffer_.size()) {
      const size_t n = std::min(size, buffer_.size() - pos_);
      std::memcpy(ptr, buffer_.data() + pos_, n);
      pos_ += n;
      consumed_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!wait(POLLIN, read_wait())) return -1;
    while (true) {
      const ssize_t n = ::recv(fd_, ptr, size, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) consumed_ += static_cast<size_t>(n);
      return n;
    }
  }
  size_t consumed() const { return consumed_; }  // bytes read() returned
  // Reads and drops `n` bytes (a body no handler read); false if they do not come.
  bool discard(size_t n) {
    char buf[4096];
    while (n > 0) {
      const ssize_t got = read(buf, std::min(n, sizeof buf));
      if (got <= 0) return false;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!wait(POLLOUT, io_ms_)) return -1;
    while (true) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    port = 0;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = address_text(a, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    port = 0;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = address_text(a, port);
  }
  socket_t socket() const override { return fd_; }

  // What was read past this request (a pipelined next one).
  std::string rest() const { return buffer_.substr(std::min(pos_, buffer_.size())); }

 private:
  int read_wait() const { return std::min(io_ms_, ms_until(deadline_)); }
  bool wait(short events, int timeout_ms) const {
    pollfd p{fd_, events, 0};
    while (true) {
      const int r = ::poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      return r > 0 && (p.revents & (events | POLLHUP)) != 0 && (p.revents & (POLLERR | POLLNVAL)) == 0;
    }
  }

  int fd_;
  std::string buffer_;
  size_t pos_ = 0;
  size_t consumed_ = 0;
  Clock::time_point deadline_;
  int io_ms_;
};

}  // namespace

Front::Front(FrontOptions options) : options_(options) {
  set_payload_max_length(options_.max_body_bytes);
}

Front::~Front() {
  shutdown();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int& fd : wake_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

int Front::open(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0 || !found) {
    fail(
        "cannot listen on '{}': --host must be a numeric IPv4 or IPv6 address such as 127.0.0.1, 0.0.0.0 "
        "or ::1 ({})",
        host, rc != 0 ? ::gai_strerror(rc) : "no address");
  }
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, found->ai_protocol);
  if (fd < 0) {
    const int err = errno;
    ::freeaddrinfo(found);
    fail("cannot create a socket for {}: {}", host, std::strerror(err));
  }
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  const bool bound = ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, 128) == 0;
  const int err = errno;
  ::freeaddrinfo(found);
  if (!bound) {
    ::close(fd);
    fail("cannot listen on {}:{}: {}", host, port, std::strerror(err));
  }
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  int bound_port = port;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_text(a, bound_port);
  listen_fd_ = fd;
  // httplib's writers of streamed responses stop once this is invalid (see shutdown()).
  svr_sock_ = fd;
  return bound_port;
}

void Front::start() {
  if (listen_fd_ < 0) fail("the server is not listening");
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) fail("cannot create a pipe: {}", std::strerror(errno));
  size_t wanted = options_.workers + options_.light_workers + 1;
  try {
    for (size_t i = 0; i < options_.workers; ++i) heavy_.threads.emplace_back([this] { worker(heavy_); });
    for (size_t i = 0; i < options_.light_workers; ++i) light_.threads.emplace_back([this] { worker(light_); });
    poller_ = std::thread([this] { poll_loop(); });
  } catch (const std::system_error& e) {
    const size_t started = heavy_.threads.size() + light_.threads.size();
    stopping_ = true;
    stop_pools();
    fail(
        "cannot start the server's threads ({} of {} started: {}); lower --parallel and --queue (each "
        "waiting request holds a thread) or raise the process's thread or memory limit",
        started, wanted, e.code().message());
  }
}

void Front::shutdown() {
  if (stopping_.exchange(true)) return;
  svr_sock_ = INVALID_SOCKET;
  if (wake_[1] >= 0) {
    const char b = 1;
    [[maybe_unused]] const ssize_t w = ::write(wake_[1], &b, 1);
  }
  if (poller_.joinable()) poller_.join();
  stop_pools();
  // Connections a worker gave back after the poller left.
  std::lock_guard lock(returned_mutex_);
  for (Conn& c : returned_) close_conn(c);
  returned_.clear();
}

void Front::stop_pools() {
  for (Pool* pool : {&heavy_, &light_}) {
    { std::lock_guard lock(pool->mutex); }
    pool->cv.notify_all();
    for (std::thread& t : pool->threads) t.join();
    pool->threads.clear();
    for (Conn& c : pool->jobs) close_conn(c);
    pool->jobs.clear();
  }
}

bool Front::client_gone() {
  if (current_fd < 0) return false;
  pollfd p{current_fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
  // Readable: a pipelined request, or the end of the stream.
  char b;
  const ssize_t n = ::recv(current_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void Front::close_conn(Conn& c) {
  if (c.fd < 0) return;
  ::shutdown(c.fd, SHUT_RDWR);
  ::close(c.fd);
  c.fd = -1;
  --open_;
}

void Front::refuse(Conn& c, int status, const std::string& code, const std::string& message) {
  const std::string body = error_json(ApiError(status, "invalid_request_error", code, message));
  send_best_effort(c.fd, fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                                     "Connection: close\r\n\r\n{}",
                                     status, reason_phrase(status), body.size(), body));
  if (on_refused) on_refused(status);
  // Close our side for writing and discard what the client still sends for a while: closing
  // with unread data would reset the connection, and the client could lose the answer.
  ::shutdown(c.fd, SHUT_WR);
  c.draining = true;
  c.drained = 0;
  c.buffer.clear();
  c.deadline = Clock::now() + std::chrono::seconds(2);
}

void Front::accept_all() {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors (the poller backs off)
    }
    ++open_;
    // Streamed answers are many small writes (an SSE event per token): with Nagle's algorithm
    // each waits for the client's delayed ACK of the one before (tens of ms), so a stream's
    // first tokens arrived ~25 ms late. Every write here is a whole event: send it now.
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Conn c;
    c.fd = fd;
    c.deadline = Clock::now() + options_.head_timeout;
    if (open_ > options_.max_connections) {
      refuse(c, 503, "too_many_connections",
             fmt::format("the server has {} connections open, its limit; retry later", options_.max_connections));
      // Not kept for draining: the limit is what is being protected.
      close_conn(c);
      continue;
    }
    std::lock_guard lock(returned_mutex_);
    returned_.push_back(std::move(c));
  }
}

void Front::poll_loop() {
  std::vector<Conn> conns;
  std::vector<pollfd> fds;
  Clock::time_point accept_paused_until{};
  while (!stopping_) {
    {
      std::lock_guard lock(returned_mutex_);
      for (Conn& c : returned_) conns.push_back(std::move(c));
      returned_.clear();
    }
    // A connection given back with a whole pipelined request already read.
    for (Conn& c : conns) {
      if (c.fd < 0 || c.draining || c.buffer.empty() || c.scanned != 0) continue;
      const size_t end = c.buffer.find("\r\n\r\n");
      if (end != std::string::npos && end + 4 <= options_.max_head_bytes) {
        if (!on_head(c, end + 4) && c.fd >= 0) c.fd = -1;
      } else {
        c.scanned = c.buffer.size();
      }
    }
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
    const Clock::time_point now = Clock::now();
    // Deadlines.
    for (Conn& c : conns) {
      if (c.fd < 0 || now < c.deadline) continue;
      if (!c.draining && c.started) {
        refuse(c, 408, "request_timeout",
               fmt::format("the request head did not arrive within {} s", options_.head_timeout.count() / 1000.0));
        c.deadline = Clock::now() + std::chrono::seconds(1);
      } else {
        close_conn(c);
      }
    }
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });

    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    const bool accepting = now >= accept_paused_until;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point next = now + std::chrono::seconds(1);
    for (const Conn& c : conns) {
      fds.push_back({c.fd, POLLIN, 0});
      next = std::min(next, c.deadline);
    }
    if (!accepting) next = std::min(next, accept_paused_until);
    const int r = ::poll(fds.data(), fds.size(), ms_until(next) + 1);
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    if (fds[0].revents) {
      char b[64];
      while (::read(wake_[0], b, sizeof b) > 0) {
      }
    }
    if (accepting && fds[1].revents) {
      accept_all();
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
      }
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      if (fds[i + 2].revents == 0) continue;
      if (!on_readable(conns[i]) && conns[i].fd >= 0) conns[i].fd = -1;  // dispatched: owned elsewhere
    }
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
  }
  for (Conn& c : conns) close_conn(c);
}

bool Front::on_readable(Conn& c) {
  char buf[8192];
  while (true) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      close_conn(c);
      return true;
    }
    if (c.draining) {
      c.drained += static_cast<size_t>(n);
      if (c.drained > (64u << 20)) {
        close_conn(c);
        return true;
      }
      continue;
    }
    if (!c.started) {
      c.started = true;
      c.deadline = Clock::now() + options_.head_timeout;
    }
    c.buffer.append(buf, static_cast<size_t>(n));
    // The head ends at the first empty line.
    const size_t from = c.scanned >= 3 ? c.scanned - 3 : 0;
    const size_t end = c.buffer.find("\r\n\r\n", from);
    if (end != std::string::npos && end + 4 <= options_.max_head_bytes) return on_head(c, end + 4);
    c.scanned = c.buffer.size();
    if (c.buffer.size() > options_.max_head_bytes) {
      refuse(c, 431, "request_header_too_large",
             fmt::format("the request line and headers are over the limit of {} bytes", options_.max_head_bytes));
      return true;
    }
    if (n < static_cast<ssize_t>(sizeof buf)) break;
  }
  return true;
}

bool Front::on_head(Conn& c, size_t head_end) {
  const std::string_view head = std::string_view(c.buffer).substr(0, head_end);
  // Every line ends in CRLF; the first is the request line.
  size_t pos = head.find("\r\n");
  const std::string_view request_line = head.substr(0, pos);
  pos += 2;
  if (request_line.find('\n') != std::string_view::npos) {
    refuse(c, 400, "bad_request", "a bare LF in the request line (lines must end in CRLF)");
    return true;
  }
  const std::string_view method = request_line.substr(0, request_line.find(' '));
  int content_lengths = 0, hosts = 0, authorizations = 0;
  bool transfer_encoding = false;
  uint64_t content_length = 0;
  bool length_ok = true;
  while (pos + 2 < head.size()) {
    const size_t eol = head.find("\r\n", pos);
    const std::string_view line = head.substr(pos, eol - pos);
    pos = eol + 2;
    const size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    const bool well_formed = colon != std::string_view::npos && colon > 0 &&
                             std::all_of(name.begin(), name.end(), is_token_char) &&
                             line.find_first_of("\r\n") == std::string_view::npos;
    if (!well_formed) {
      refuse(c, 400, "bad_request",
             "a malformed header line (each must be 'Name: value' ending in CRLF, "
             "with no folding)");
      return true;
    }
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (iequals(name, "Transfer-Encoding")) {
      transfer_encoding = true;
    } else if (iequals(name, "Content-Length")) {
      ++content_lengths;
      length_ok = !value.empty() && value.size() <= 18 &&
                  std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      if (length_ok) content_length = std::stoull(std::string(value));
    } else if (iequals(name, "Host")) {
      ++hosts;
    } else if (iequals(name, "Authorization")) {
      ++authorizations;
    }
  }
  if (transfer_encoding) {
    refuse(c, 411, "length_required",
           "Transfer-Encoding is not accepted (no chunked bodies): send the body with a Content-Length");
    return true;
  }
  if (content_lengths > 1) {
    refuse(c, 400, "bad_request", "more than one Content-Length header");
    return true;
  }
  if (!length_ok) {
    refuse(c, 400, "bad_request", "Content-Length must be a decimal number of bytes");
    return true;
  }
  if (hosts > 1) {
    refuse(c, 400, "bad_request", "more than one Host header");
    return true;
  }
  // httplib would read the first; a proxy in front may have checked another.
  if (authorizations > 1) {
    refuse(c, 400, "bad_request", "more than one Authorization header");
    return true;
  }
  if (content_length > options_.max_body_bytes) {
    refuse(c, 413, "request_too_large",
           fmt::format("the body is {} bytes, over the limit of {} bytes", content_length, options_.max_body_bytes));
    return true;
  }
  // The whole request, body included, must arrive within the body deadline.
  c.deadline = Clock::now() + options_.body_timeout;
  c.request_bytes = head_end + content_length;
  Pool& pool = (content_length == 0 && (method == "GET" || method == "HEAD")) ? light_ : heavy_;
  {
    std::lock_guard lock(pool.mutex);
    pool.jobs.push_back(std::move(c));
  }
  pool.cv.notify_one();
  return false;
}

void Front::worker(Pool& pool) {
  while (true) {
    Conn c;
    {
      std::unique_lock lock(pool.mutex);
      pool.cv.wait(lock, [&] { return stopping_ || !pool.jobs.empty(); });
      if (pool.jobs.empty()) return;  // stopping
      c = std::move(pool.jobs.front());
      pool.jobs.pop_front();
    }
    answer(std::move(c));
  }
}

void Front::answer(Conn c) {
  ConnStream stream(c.fd, std::move(c.buffer), c.deadline, options_.io_timeout);
  current_fd = c.fd;
  bool closed = false;
  bool ok = false;
  try {
    ok = process_request(stream, /*close_connection=*/stopping_, closed, nullptr);
  } catch (...) {
    ok = false;
  }
  current_fd = -1;
  // A request refused before its body was read (401, 415 ...) leaves the body on the
  // connection: it is dropped here, or it would be read as the next request.
  const size_t consumed = stream.consumed();
  if (ok && !closed && !stopping_ && consumed < c.request_bytes) ok = stream.discard(c.request_bytes - consumed);
  if (!ok || closed || stopping_) {
    close_conn(c);
    return;
  }
  Conn next;
  next.fd = c.fd;
  next.buffer = stream.rest();
  next.started = !next.buffer.empty();
  next.deadline = Clock::now() + (next.started ? options_.head_timeout : options_.idle_timeout);
  give_back(std::move(next));
}

void Front::give_back(Conn c) {
  {
    std::lock_guard lock(returned_mutex_);
    returned_.push_back(std::move(c));
  }
  const char b = 1;
  [[maybe_unused]] const ssize_t w = ::write(wake_[1], &b, 1);
}

}  // namespace nanoinfer::serve
