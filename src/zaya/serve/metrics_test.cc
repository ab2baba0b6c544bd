#include "zaya/serve/metrics.h"

#include <gtest/gtest.h>

namespace zaya {
namespace {

TEST(ServerMetrics, PrometheusTextWithCumulativeBuckets) {
  ServerMetrics m({"/v1/completions", "/v1/chat/completions"});
  m.request("/v1/completions", 200);
  m.request("/v1/completions", 200);
  m.request("/v1/chat/completions", 400);
  m.tokens(7, 5);
  m.cancelled();
  m.first_token(0.003);
  m.first_token(0.2);
  m.inter_token(0.02);
  MetricsGauges g;
  g.waiting = 3;
  g.kv_pages = 40;
  g.kv_pages_used = 12;
  const std::string text = m.render(g);
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("zaya_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2")) << text;
  EXPECT_TRUE(has("zaya_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1"));
  EXPECT_TRUE(has("# TYPE zaya_prompt_tokens_total counter"));
  EXPECT_TRUE(has("zaya_prompt_tokens_total 7"));
  EXPECT_TRUE(has("zaya_generation_tokens_total 5"));
  EXPECT_TRUE(has("zaya_requests_cancelled_total 1"));
  EXPECT_TRUE(has("zaya_queue_depth 3"));
  EXPECT_TRUE(has("zaya_kv_pages 40"));
  EXPECT_TRUE(has("zaya_kv_pages_used 12"));
  EXPECT_TRUE(has("# TYPE zaya_prefix_cache_evictions_total counter"));
  EXPECT_TRUE(has("# TYPE zaya_time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has("zaya_time_to_first_token_seconds_bucket{le=\"0.005\"} 1"));
  EXPECT_TRUE(has("zaya_time_to_first_token_seconds_bucket{le=\"0.1\"} 1"));
  EXPECT_TRUE(has("zaya_time_to_first_token_seconds_bucket{le=\"0.25\"} 2"));
  EXPECT_TRUE(has("zaya_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2"));
  EXPECT_TRUE(has("zaya_time_to_first_token_seconds_count 2"));
  EXPECT_TRUE(has("zaya_inter_token_latency_seconds_bucket{le=\"0.025\"} 1"));
  EXPECT_TRUE(has("zaya_inter_token_latency_seconds_bucket{le=\"0.01\"} 0"));
}

TEST(ServerMetrics, EndpointLabelIsBoundedAndEscaped) {
  ServerMetrics m({"/health", "/a\"b\\c\nd"});
  m.request("/x\"} 1\nfake_metric 42\n#", 404);
  m.request("/nope", 404);
  m.request("/a\"b\\c\nd", 200);
  const std::string text = m.render(MetricsGauges{});
  EXPECT_EQ(text.find("fake_metric"), std::string::npos) << text;
  EXPECT_NE(text.find("zaya_requests_total{endpoint=\"other\",status=\"404\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("zaya_requests_total{endpoint=\"/a\\\"b\\\\c\\nd\",status=\"200\"} 1\n"), std::string::npos)
      << text;
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

}  // namespace
}  // namespace zaya
