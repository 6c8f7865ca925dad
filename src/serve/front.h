// The connection front of `nanoinfer serve`: listening, reading request heads, connection
// limits and deadlines, with cpp-httplib's Server kept for parsing a request, routing it and
// writing the response (Server::process_request on a stream of ours).
//
// cpp-httplib gives each connection a thread from the moment it is accepted, so clients that
// send their headers one byte at a time (or open a connection and send nothing, as browsers'
// preconnects do) hold every thread and starve /health. Here one poller thread owns every
// connection that is not being answered: it accepts, reads request heads without blocking
// (a deadline for the whole head, a size limit), closes idle keep-alive connections, and
// refuses what must never reach the parser:
//   - more than `max_connections` open connections (503, then closed),
//   - a head over `max_head_bytes` (431) or not complete within `head_timeout` (408),
//   - any Transfer-Encoding (411: bodies must come with one Content-Length), a duplicate or
//     malformed Content-Length, a header line that is not `token ":" value` CRLF, a duplicate
//     Host or Authorization (400): what a proxy in front could read differently,
//   - a Content-Length over `max_body_bytes` (413, before reading the body).
// Only a complete head is handed to a worker thread, which reads the body (with its own
// deadline) and answers; requests without a body (GET /health, /metrics, /v1/models) have
// their own small pool, so long generations never delay them. After the answer a keep-alive
// connection goes back to the poller.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nanoinfer::serve {

struct FrontOptions {
  size_t max_connections = 512;   // open at once, in any state; more are refused with 503
  size_t workers = 8;             // threads answering requests with a body
  size_t light_workers = 2;       // threads answering requests without one
  size_t max_head_bytes = 16384;  // request line + headers
  size_t max_body_bytes = 4 << 20;
  std::chrono::milliseconds head_timeout{10000};  // the whole head, from its first byte
  std::chrono::milliseconds idle_timeout{5000};   // a connection with no request coming
  std::chrono::milliseconds body_timeout{60000};  // the whole body
  std::chrono::milliseconds io_timeout{10000};    // one read or write that makes no progress
};

class Front : public httplib::Server {
 public:
  explicit Front(FrontOptions options);
  ~Front() override;

  // Binds host:port (0 = any free port) and listens; returns the bound port. Throws Error
  // naming the address and the reason.
  int open(const std::string& host, int port);
  // Starts the poller and worker threads. Throws Error (nothing left running) if the system
  // refuses a thread.
  void start();
  // Stops accepting, closes idle connections, lets workers finish what they answer, joins.
  void shutdown();

  // Called with the status of every refusal the front answers itself (for /metrics).
  std::function<void(int status)> on_refused;

  // True when the client of the request being answered on this thread has closed its
  // connection (or reset it). For handlers that wait: a client that left cancels its work.
  static bool client_gone();

  size_t open_connections() const { return open_; }

 private:
  struct Conn {
    int fd = -1;
    std::string buffer;  // bytes received and not yet consumed
    size_t scanned = 0;  // buffer prefix known not to hold the end of the head
    std::chrono::steady_clock::time_point deadline;
    bool started = false;   // a byte of the current head has arrived
    bool draining = false;  // answered and closing: discard what still comes
    size_t drained = 0;
    size_t request_bytes = 0;  // head + Content-Length of the request being answered
  };
  struct Pool {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Conn> jobs;
    std::vector<std::thread> threads;
  };

  void poll_loop();
  void accept_all();
  // Reads what is available; false when the connection is to be dropped from the poller
  // (closed, refused or dispatched).
  bool on_readable(Conn& c);
  bool on_head(Conn& c, size_t head_end);
  void refuse(Conn& c, int status, const std::string& code, const std::string& message);
  void worker(Pool& pool);
  void answer(Conn c);
  void give_back(Conn c);
  void close_conn(Conn& c);
  void stop_pools();

  FrontOptions options_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: workers and shutdown wake the poller
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> open_{0};
  std::thread poller_;
  Pool heavy_, light_;
  std::mutex returned_mutex_;
  std::vector<Conn> returned_;  // keep-alive connections given back by workers
};

}  // namespace nanoinfer::serve
