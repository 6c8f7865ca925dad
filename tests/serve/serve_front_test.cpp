// The connection front of `nanoinfer serve` (src/serve/front.h), in process.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/front.h"

namespace nanoinfer::serve {
namespace {

// The local port of a TCP socket, or -1 when fd is not one.
int local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sin_family != AF_INET) return -1;
  return ntohs(addr.sin_port);
}

bool has_peer(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
}

// Every accepted connection has Nagle's algorithm off: a streamed answer is one small write per
// event, and with Nagle each would wait for the client's delayed ACK of the one before.
TEST(ServeFront, AcceptedConnectionsSendWithoutNagleDelay) {
  FrontOptions options;
  options.workers = 1;
  options.light_workers = 1;
  Front front(options);
  front.Get("/ping", [](const httplib::Request&, httplib::Response& res) { res.set_content("pong", "text/plain"); });
  const int port = front.open("127.0.0.1", 0);
  front.start();

  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request = "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(client, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string answer;
  char buf[512];
  while (answer.find("pong") == std::string::npos) {
    const ssize_t n = ::recv(client, buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << answer;
    answer.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(answer.find("200"), std::string::npos) << answer;

  // The server's side of the connection: this process's other socket on the server's port
  // that has a peer (the listening socket has none). The client socket's local port differs.
  std::vector<int> accepted;
  DIR* dir = ::opendir("/proc/self/fd");
  ASSERT_NE(dir, nullptr);
  while (const dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2 || fd == client || fd == ::dirfd(dir)) continue;
    if (local_port(fd) == port && has_peer(fd)) accepted.push_back(fd);
  }
  ::closedir(dir);
  ASSERT_EQ(accepted.size(), 1u);
  int nodelay = 0;
  socklen_t len = sizeof nodelay;
  ASSERT_EQ(::getsockopt(accepted[0], IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
  // The client's own socket kept the system default (off): the option is the server's doing.
  int client_nodelay = 1;
  ASSERT_EQ(::getsockopt(client, IPPROTO_TCP, TCP_NODELAY, &client_nodelay, &len), 0);
  EXPECT_EQ(client_nodelay, 0);

  ::close(client);
  front.shutdown();
}

}  // namespace
}  // namespace nanoinfer::serve
