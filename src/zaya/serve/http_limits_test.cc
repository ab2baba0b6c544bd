// The server's HTTP limits, each from a red-team reproducer (docs/serve.md,
// "Security and limits"): chunked bodies under --max-body-bytes, framing
// (conflicting or impossible lengths), the read deadline, head size, methods,
// paths and types with a sentence, a bounded /metrics label set, the API key.
#include <gtest/gtest.h>

#include <thread>

#include "zaya/io/json_file.h"
#include "zaya/serve/test_util.h"

namespace zaya {
namespace {

using testing::RawConnection;
using testing::response_status;
using testing::ServedModel;

std::string post_head(const std::string& path, const std::string& extra) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra + "\r\n";
}

TEST(HttpLimits, ChunkedBodyOverMaxBodyBytesGets413) {
  ServedModel s;
  s.start();
  RawConnection c(s.server->port());
  ASSERT_TRUE(c.connected());
  // 2 MB in 64 KB chunks against the 1 MiB limit, sent beside the read (the server stops reading at the limit).
  std::thread sender([&] {
    if (!c.send(post_head("/v1/completions", "Transfer-Encoding: chunked\r\n"))) return;
    const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
    for (int i = 0; i < 32 && !c.answered(); ++i)
      if (!c.send(chunk)) return;
    c.send("0\r\n\r\n");
  });
  const std::string response = c.read_all();
  sender.join();
  EXPECT_EQ(response_status(response), 413) << response.substr(0, 300);
  EXPECT_NE(response.find("--max-body-bytes"), std::string::npos);
  // A chunked body under the limit is read as before.
  auto cli = s.client();
  auto ok = cli.Post("/v1/completions", std::string(R"({"prompt": "In", "max_tokens": 2})"), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  RawConnection small(s.server->port());
  const std::string body = R"({"prompt": "In", "max_tokens": 2})";
  small.send(post_head("/v1/completions", "Transfer-Encoding: chunked\r\nConnection: close\r\n") +
             fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body));
  EXPECT_EQ(response_status(small.read_all()), 200);
}

TEST(HttpLimits, FramingConflictsAndImpossibleLengthsAreRefusedAtOnce) {
  ServedModel s([](ServerOptions& o, ZayaConfig&) { o.io_timeout = 60; });
  s.start();
  const auto answer = [&](const std::string& request) {
    RawConnection c(s.server->port(), 10);  // httplib's drain of a claimed body would outlast this
    c.send(request);
    return c.read_all();
  };
  std::string r = answer(post_head("/v1/completions", "Content-Length: 16\r\nContent-Length: 2\r\n") + "{}");
  EXPECT_EQ(response_status(r), 400) << r;
  EXPECT_NE(r.find("conflicting Content-Length"), std::string::npos);
  r = answer(post_head("/v1/completions", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n") + "0\r\n\r\n");
  EXPECT_EQ(response_status(r), 400) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos);
  r = answer(post_head("/v1/completions", "Content-Length: 1000000000000000\r\n") + "0123456789");
  EXPECT_EQ(response_status(r), 413) << r;
  r = answer(post_head("/v1/completions", "Content-Length: -1\r\n") + "0123456789");
  EXPECT_EQ(response_status(r), 400) << r;
  EXPECT_NE(r.find("not a byte count"), std::string::npos);
}

TEST(HttpLimits, SlowClientGets408AtTheReadDeadline) {
  ServedModel s([](ServerOptions& o, ZayaConfig&) { o.read_deadline = 0.5; });
  s.start();
  // One byte per 100 ms, as a slowloris client, for at most 6 s (12 deadlines):
  // once in the request line (httplib answers nothing there), once in the headers.
  const std::string slow(60, 'a');
  for (const auto& [at_once, dribbled] : {std::pair{std::string("G"), "ET /health HTTP/1.1\r\nX-Slow: " + slow},
                                          std::pair{std::string("GET /health HTTP/1.1\r\n"), "X-Slow: " + slow}}) {
    RawConnection c(s.server->port(), 10);
    c.send(at_once);
    for (size_t i = 0; i < dribbled.size() && !c.answered(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      c.send(dribbled.substr(i, 1));
    }
    const std::string r = c.read_all();
    EXPECT_EQ(response_status(r), 408) << r;
    EXPECT_NE(r.find("--read-deadline"), std::string::npos) << r;
  }
}

TEST(HttpLimits, ProtocolErrorsGetASentence) {
  ServedModel s;
  s.start();
  const auto answer = [&](const std::string& request) {
    RawConnection c(s.server->port(), 10);
    c.send(request);
    return c.read_all();
  };
  std::string r = answer("GET\r\n\r\n");
  EXPECT_EQ(response_status(r), 400) << r;
  EXPECT_NE(r.find("malformed"), std::string::npos);
  r = answer("FOO /v1/completions HTTP/1.1\r\n\r\n");
  EXPECT_EQ(response_status(r), 501) << r;
  r = answer("TRACE / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(response_status(r), 501) << r;
  r = answer("OPTIONS /v1/completions HTTP/1.1\r\n\r\n");
  EXPECT_EQ(response_status(r), 405) << r;
  EXPECT_NE(r.find("Allow: POST"), std::string::npos) << r;
  r = answer("GET /v1/completions HTTP/1.1\r\n\r\n");
  EXPECT_EQ(response_status(r), 405) << r;
  r = answer("GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(response_status(r), 414) << r;
  EXPECT_NE(r.find("request line is longer"), std::string::npos);
  r = answer("GET /health HTTP/1.1\r\nX-Big: " + std::string(100000, 'a') + "\r\n\r\n");
  EXPECT_EQ(response_status(r), 431) << r.substr(0, 300);
  for (const std::string type :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"}) {
    const std::string body = R"({"prompt": "x"})";
    r = answer("POST /v1/completions HTTP/1.1\r\nContent-Type: " + type +
               "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_EQ(response_status(r), 415) << type << ": " << r;
    EXPECT_NE(r.find("Content-Type: application/json"), std::string::npos);
  }
}

TEST(HttpLimits, MetricsLabelsAreBoundedAndEscaped) {
  ServedModel s;
  s.start();
  auto cli = s.client();
  for (const char* path : {"/x%22%7D%201%0Afake_metric%2042%0A%23", "/nope-1", "/nope-2"}) {
    auto res = cli.Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404);
  }
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body.find("fake_metric"), std::string::npos) << m->body;
  EXPECT_EQ(m->body.find("nope"), std::string::npos);
  EXPECT_NE(m->body.find("zaya_requests_total{endpoint=\"other\",status=\"404\"} 3\n"), std::string::npos) << m->body;
}

TEST(HttpLimits, RequestThatCanNeverFitGets400NamingN) {
  ServedModel s([](ServerOptions& o, ZayaConfig&) {
    o.serving.max_batch = 1;
    o.serving.max_waiting = 2;
  });
  s.start();
  auto res = s.client().Post("/v1/completions", R"({"prompt": "x", "n": 4})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_EQ(parse_json(res->body, "response")["error"]["param"], "n");
}

TEST(HttpLimits, BearerSchemeIsCaseInsensitive) {
  ServedModel s([](ServerOptions& o, ZayaConfig&) { o.api_key = "sekrit"; });
  s.start();
  auto cli = s.client();
  for (const auto& [header, status] :
       {std::pair{"bearer sekrit", 200}, std::pair{"BEARER sekrit", 200}, std::pair{"Bearer sekri", 401},
        std::pair{"Bearer sekritt", 401}, std::pair{"Bearer  sekrit", 401}, std::pair{"sekrit", 401}}) {
    auto res = cli.Get("/v1/models", {{"Authorization", header}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << header;
  }
}

}  // namespace
}  // namespace zaya
