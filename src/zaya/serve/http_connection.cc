#include "zaya/serve/http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "zaya/core/timer.h"

namespace zaya {
namespace {

thread_local HttpRequestState* t_request = nullptr;

// Waits up to `seconds` for `events` on `fd`; false on a timeout or an error.
bool poll_for(int fd, short events, double seconds) {
  pollfd p{fd, events, 0};
  const int ms = int(std::ceil(std::max(0.0, seconds) * 1000));
  int n;
  do n = ::poll(&p, 1, ms);
  while (n < 0 && errno == EINTR);
  return n > 0;
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ip.clear();
  port = 0;
  if ((peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
            : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)) != 0)
    return;
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

// A connection's socket as httplib reads and writes it, with the request's
// read deadline and head cap. The read buffer outlives a request (pipelined
// requests arrive in one read); the counters start again with each request.
class GuardedStream : public httplib::Stream {
 public:
  GuardedStream(int fd, double io_timeout) : fd_(fd), io_timeout_(io_timeout) {}

  void begin_request(HttpRequestState* state, double deadline) {
    state_ = state;
    deadline_ = deadline;
    head_bytes_ = 0;
    written_ = 0;
  }
  int64_t written() const { return written_; }

  // Whether a next request starts within `seconds` (buffered bytes count), polling `running` meanwhile.
  bool wait_for_request(double seconds, const std::function<bool()>& running) {
    const double end = now_seconds() + seconds;
    while (running()) {
      if (off_ < len_) return true;
      const double left = end - now_seconds();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      const int n = ::poll(&p, 1, int(std::min(left, 0.05) * 1000) + 1);
      if (n > 0) return (p.revents & POLLIN) != 0;
      if (n < 0 && errno != EINTR) return false;
    }
    return false;
  }

  bool is_readable() const override { return off_ < len_ || poll_for(fd_, POLLIN, read_wait()); }
  bool is_writable() const override { return poll_for(fd_, POLLOUT, io_timeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ == len_) {
      if (!poll_for(fd_, POLLIN, read_wait())) {
        if (state_ && now_seconds() >= deadline_) state_->deadline_passed = true;
        return -1;
      }
      ssize_t n;
      do n = ::recv(fd_, buf_.data(), buf_.size(), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      len_ = size_t(n);
    }
    const size_t n = std::min(size, len_ - off_);
    std::memcpy(ptr, buf_.data() + off_, n);
    off_ += n;
    if (state_ && !state_->head_accepted && (head_bytes_ += int64_t(n)) > kMaxHeadBytes) {
      state_->head_too_large = true;
      return -1;
    }
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n > 0) written_ += n;
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // A read waits for the I/O timeout, and not past the request's deadline.
  double read_wait() const { return std::min(io_timeout_, deadline_ - now_seconds()); }

  const int fd_;
  const double io_timeout_;
  std::array<char, 4096> buf_{};
  size_t off_ = 0, len_ = 0;
  HttpRequestState* state_ = nullptr;
  double deadline_ = 0;
  int64_t head_bytes_ = 0, written_ = 0;
};

// Closes after an answer that left request bytes unread: the write side
// first, then a bounded drain, so that the client reads the answer before a
// reset (a close with unread bytes sends RST, and the peer drops what it had
// not read yet).
void lingering_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  std::array<char, 16384> scratch{};
  const double end = now_seconds() + 1;
  for (int64_t drained = 0; drained < (int64_t(8) << 20) && poll_for(fd, POLLIN, end - now_seconds());) {
    const ssize_t n = ::recv(fd, scratch.data(), scratch.size(), 0);
    if (n <= 0) break;
    drained += n;
  }
}

const char* early_reason(int status) { return status == 408 ? "Request Timeout" : "Request Header Fields Too Large"; }

}  // namespace

HttpRequestState* current_http_request() { return t_request; }

GuardedHttpServer::GuardedHttpServer(double read_deadline, double io_timeout)
    : read_deadline_(read_deadline), io_timeout_(io_timeout) {
  // SO_REUSEADDR (a restart may bind while old connections are in TIME_WAIT)
  // and not SO_REUSEPORT: a second server on a port in use must fail to bind.
  set_socket_options([](socket_t fd) {
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

int GuardedHttpServer::bind_listener(const std::string& host, int port) {
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  // Listening again on a listening socket sets its backlog (Linux, listen(2)).
  if (bound > 0) ::listen(svr_sock_, SOMAXCONN);
  return bound;
}

int GuardedHttpServer::listen_backlog() const {
  tcp_info info{};
  socklen_t len = sizeof(info);
  const socket_t fd = svr_sock_;
  if (fd == INVALID_SOCKET || ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  // For a listening socket the kernel reports its accept-queue limit in tcpi_sacked (tcp_get_info).
  return info.tcpi_state == TCP_LISTEN ? int(info.tcpi_sacked) : -1;
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  GuardedStream strm(sock, io_timeout_);
  const auto running = [this] { return svr_sock_ != INVALID_SOCKET; };
  bool ok = false;
  // As httplib's own loop: up to keep_alive_max_count_ requests, each within
  // keep_alive_timeout_sec_ of the previous answer.
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!strm.wait_for_request(double(keep_alive_timeout_sec_), running)) break;
    HttpRequestState state;
    strm.begin_request(&state, now_seconds() + read_deadline_);
    t_request = &state;
    bool closed = false;
    ok = process_request(strm, left == 1, closed, nullptr);
    t_request = nullptr;
    // httplib answers nothing when the request line itself did not arrive whole: answer here.
    if (!ok && strm.written() == 0 && (state.deadline_passed || state.head_too_large)) {
      const int status = state.deadline_passed ? 408 : 431;
      const std::string body = early_error_body_ ? early_error_body_(status) : "";
      const std::string head =
          "HTTP/1.1 " + std::to_string(status) + " " + early_reason(status) +
          "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n\r\n";
      strm.write((head + body).data(), head.size() + body.size());
    }
    if (!state.head_accepted || state.close) {
      lingering_close(sock);
      break;
    }
    if (!ok || closed) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace zaya
