#pragma once
// A real ApiServer on a free loopback port over a small random model, for
// the serve/ tests, and a raw-socket client for requests httplib's client
// would not send (malformed, slow, oversized).
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "zaya/data/test_util.h"
#include "zaya/infer/test_util.h"
#include "zaya/serve/api_server.h"

namespace zaya::testing {

struct ServedModel {
  std::unique_ptr<ZayaModel> model;
  std::unique_ptr<InferModel> im;
  Tokenizer tok = Tokenizer::load(small_tokenizer_path());
  std::unique_ptr<ApiServer> server;
  std::thread thread;

  // `tweak` adjusts the options (and the model's positions) before the server starts.
  explicit ServedModel(const std::function<void(ServerOptions&, ZayaConfig&)>& tweak = {}) {
    ZayaConfig c = small_test_config();
    c.vocab_size = 512;
    c.real_vocab_size = 400;
    ServerOptions o;
    o.port = 0;
    o.model_name = "tiny-test";
    o.serving.max_batch = 2;
    o.serving.sample_vocab = 400;
    if (tweak) tweak(o, c);
    model = random_model(c, 51);
    im = InferModel::from_model(*model);
    server = std::make_unique<ApiServer>(*im, tok, o);
    server->bind();
  }
  void start() {
    thread = std::thread([this] { server->run(); });
  }
  ~ServedModel() {
    server->stop();
    if (thread.joinable()) thread.join();
  }
  httplib::Client client() const {
    httplib::Client cli("127.0.0.1", server->port());
    cli.set_read_timeout(60, 0);
    return cli;
  }
};

// One connection to 127.0.0.1:port with a receive timeout.
class RawConnection {
 public:
  explicit RawConnection(int port, int recv_timeout_seconds = 20) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{recv_timeout_seconds, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool connected() const { return connected_; }
  bool send(const std::string& bytes) {
    for (size_t at = 0; at < bytes.size();) {
      const ssize_t n = ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += size_t(n);
    }
    return true;
  }
  // Everything the server sends until it closes the connection (or the receive timeout).
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof(buf), 0)) > 0;) out.append(buf, size_t(n));
    return out;
  }
  // Reads until `marker` has arrived (or the connection ends); returns what came.
  std::string read_until(const std::string& marker) {
    std::string out;
    char buf[4096];
    for (ssize_t n; out.find(marker) == std::string::npos && (n = ::recv(fd_, buf, sizeof(buf), 0)) > 0;)
      out.append(buf, size_t(n));
    return out;
  }
  // Whether the server has sent something or closed, without waiting.
  bool answered() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The status of an HTTP response's first line ("HTTP/1.1 413 ..."), or 0.
inline int response_status(const std::string& response) {
  return response.rfind("HTTP/1.1 ", 0) == 0 && response.size() >= 12 ? std::stoi(response.substr(9, 3)) : 0;
}

}  // namespace zaya::testing
