#pragma once
// The connection layer under zaya serve's routes: cpp-httplib's Server with
// its per-connection loop replaced (process_and_close_socket is the library's
// virtual hook), so that the server, not the library, bounds what one client
// can make it hold. Debian's packaged library (0.11.4, a shared object) reads
// a request head of any length and lets a client take any time over it.
//
//  - A deadline for each request's head and body (--read-deadline): a client
//    that sends them slowly (slowloris) gets 408 and a close, whatever its pace.
//  - A cap on the head's bytes (kMaxHeadBytes): 431 beyond, before any of it
//    is buffered whole.
//  - A close after any request whose head the routes did not accept, or that
//    they marked (HttpRequestState::close): an unread body is never parsed as
//    the next request.
//  - The listening socket: SO_REUSEADDR only (httplib's default adds
//    SO_REUSEPORT, which lets a second server share a port that is in use)
//    and a backlog of SOMAXCONN (the packaged library listens with 5, so a
//    burst of connects waits for SYN retransmits).

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <string>

namespace zaya {

// Bytes of a request line and headers together; 431 beyond.
inline constexpr int64_t kMaxHeadBytes = 64 * 1024;

// What the connection layer learnt about the request a thread is handling.
struct HttpRequestState {
  bool head_accepted = false;    // the routes' pre-routing check saw the head (set by them)
  bool deadline_passed = false;  // the head or body did not arrive within the read deadline
  bool head_too_large = false;   // the head went past kMaxHeadBytes
  bool close = false;            // close the connection after this answer
};

// The state of the request this thread is reading or answering; nullptr
// outside GuardedHttpServer's connections.
HttpRequestState* current_http_request();

class GuardedHttpServer : public httplib::Server {
 public:
  // `read_deadline`: seconds for a request's head and body; `io_timeout`:
  // seconds one read or write may wait.
  GuardedHttpServer(double read_deadline, double io_timeout);

  // Binds `host`:`port` (0: any free port) and listens with a backlog of
  // SOMAXCONN; returns the port, or -1 when the address is in use or not this machine's.
  int bind_listener(const std::string& host, int port);
  // The listening socket's accept-queue limit as the kernel reports it (TCP_INFO); -1 before bind.
  int listen_backlog() const;

  // The JSON body of the answers the server writes itself, when a request
  // ends before httplib could answer it (408 for the deadline, 431 for the head).
  void set_early_error_body(std::function<std::string(int status)> body) { early_error_body_ = std::move(body); }

 protected:
  bool process_and_close_socket(socket_t sock) override;

 private:
  double read_deadline_, io_timeout_;
  std::function<std::string(int status)> early_error_body_;
};

}  // namespace zaya
