// The connection layer alone: a second server on a port in use fails to
// bind (no SO_REUSEPORT), and the listen backlog holds a burst of 64
// connects that nobody accepts yet (the packaged httplib listens with 5).
#include "zaya/serve/http_connection.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace zaya {
namespace {

TEST(GuardedHttpServer, SecondServerOnAPortInUseFailsToBind) {
  GuardedHttpServer first(5, 5), second(5, 5);
  const int port = first.bind_listener("127.0.0.1", 0);
  ASSERT_GT(port, 0);
  EXPECT_EQ(second.bind_listener("127.0.0.1", port), -1);
}

TEST(GuardedHttpServer, BacklogHoldsSixtyFourConnectsBeforeAccept) {
  GuardedHttpServer server(5, 5);
  const int port = server.bind_listener("127.0.0.1", 0);
  ASSERT_GT(port, 0);
  EXPECT_GE(server.listen_backlog(), 64);
  // Nothing accepts (listen_after_bind is not running): every connect must
  // still complete its handshake into the accept queue.
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<pollfd> fds;
  for (int i = 0; i < 64; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
    fds.push_back({fd, POLLOUT, 0});
  }
  // Loopback handshakes complete within connect(); a SYN dropped for a full
  // queue is retried only after 1 s (and dropped again: nothing accepts), so
  // a short bounded wait tells the two apart.
  int established = 0;
  for (int round = 0; round < 20 && established < 64; ++round) {
    if (round > 0) ::poll(nullptr, 0, 10);
    established = 0;
    for (const pollfd& p : fds) {
      tcp_info info{};
      socklen_t len = sizeof(info);
      ::getsockopt(p.fd, IPPROTO_TCP, TCP_INFO, &info, &len);
      established += info.tcpi_state == TCP_ESTABLISHED;
    }
  }
  for (const pollfd& p : fds) ::close(p.fd);
  EXPECT_EQ(established, 64);
}

}  // namespace
}  // namespace zaya
