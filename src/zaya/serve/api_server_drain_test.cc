// Shutdown and time limits: a drain refuses new requests with 503 and lets
// those in flight finish; requests cut at the end of the grace, or at
// --request-timeout, are reported as failures (an error body, or an error
// event without [DONE]), never as successes with a truncated text; SIGTERM is
// seen by the next request at once, and a second one ends the grace.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "zaya/serve/test_util.h"

namespace zaya {
namespace {

using testing::RawConnection;
using testing::response_status;
using testing::ServedModel;

// Long enough that a request is still generating when the test acts (greedy, thousands of tokens).
ServedModel long_context_server(double request_timeout = 600) {
  return ServedModel([request_timeout](ServerOptions& o, ZayaConfig& c) {
    c.max_position = 16384;
    o.request_timeout = request_timeout;
  });
}

const char* kLongBody = R"({"prompt": "In the beginning", "max_tokens": 15000, "temperature": 0)";

std::string stream_request(const std::string& body) {
  return "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

int64_t in_flight(ServedModel& s) {
  auto m = s.client().Get("/metrics");
  if (!m) return -1;
  const size_t at = m->body.find("\nzaya_requests_in_flight ");
  return at == std::string::npos ? -1 : std::stoll(m->body.substr(at + 25));
}

// Waits (bounded) until `n` requests are generating.
void wait_in_flight(ServedModel& s, int64_t n) {
  for (int i = 0; i < 1000 && in_flight(s) != n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(in_flight(s), n);
}

TEST(ApiServerDrain, CutRequestsGetErrorsNotSuccesses) {
  ServedModel s = long_context_server();
  s.start();
  std::string whole;
  std::thread client([&] {
    auto res = s.client().Post("/v1/completions", std::string(kLongBody) + "}", "application/json");
    if (res) whole = res->body;
  });
  RawConnection c(s.server->port(), 60);
  c.send(stream_request(std::string(kLongBody) + R"(, "stream": true})"));
  std::string streamed = c.read_until("data: ");
  wait_in_flight(s, 2);
  EXPECT_EQ(s.server->drain(0), 2);
  streamed += c.read_all();
  client.join();
  EXPECT_NE(whole.find("\"code\":\"server_shutdown\""), std::string::npos) << whole.substr(0, 300);
  EXPECT_EQ(whole.find("\"finish_reason\""), std::string::npos);
  EXPECT_NE(streamed.find("\"code\":\"server_shutdown\""), std::string::npos);
  EXPECT_EQ(streamed.find("[DONE]"), std::string::npos);
}

TEST(ApiServerDrain, RequestTimeoutIsAnErrorNotLength) {
  ServedModel s = long_context_server(0.3);
  s.start();
  auto res = s.client().Post("/v1/completions", std::string(kLongBody) + "}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("\"code\":\"request_timeout\""), std::string::npos) << res->body.substr(0, 300);
  RawConnection c(s.server->port(), 60);
  c.send(stream_request(std::string(kLongBody) + R"(, "stream": true})"));
  const std::string streamed = c.read_all();
  EXPECT_NE(streamed.find("\"code\":\"request_timeout\""), std::string::npos);
  EXPECT_EQ(streamed.find("[DONE]"), std::string::npos);
}

TEST(ApiServerDrain, SigtermRefusesTheNextRequestAndASecondEndsTheGrace) {
  ServedModel s = long_context_server();
  int64_t cut = -1;
  std::thread serving([&] { cut = s.server->run_until_signal(); });
  RawConnection c(s.server->port(), 60);  // the socket is bound: this connect waits in the backlog
  c.send(stream_request(std::string(kLongBody) + R"(, "stream": true})"));
  c.read_until("data: ");
  std::raise(SIGTERM);
  // Sent right after the signal: refused (503 with a sentence and Retry-After), not accepted.
  auto res = s.client().Post("/v1/completions", R"({"prompt": "x", "max_tokens": 1})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_NE(res->body.find("shutting down"), std::string::npos);
  std::raise(SIGTERM);  // the default grace is 20 s: the second signal ends it now
  serving.join();
  EXPECT_EQ(cut, 1);
  EXPECT_EQ(c.read_all().find("[DONE]"), std::string::npos);
}

TEST(ApiServerDrain, InFlightRequestsFinishWithinTheGrace) {
  ServedModel s = long_context_server();
  s.start();
  std::string body;
  std::thread client([&] {
    auto res = s.client().Post("/v1/completions", R"({"prompt": "In", "max_tokens": 3000, "temperature": 0})",
                               "application/json");
    if (res) body = res->body;
  });
  wait_in_flight(s, 1);
  EXPECT_EQ(s.server->drain(60), 0);
  client.join();
  EXPECT_NE(body.find("\"finish_reason\""), std::string::npos) << body.substr(0, 300);
  EXPECT_EQ(body.find("\"error\""), std::string::npos) << body.substr(0, 300);
}

}  // namespace
}  // namespace zaya
