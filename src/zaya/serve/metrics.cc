#include "zaya/serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace zaya {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double v) {
  const size_t b = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[b];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  int64_t cumulative = 0;
  for (size_t b = 0; b < bounds_.size(); ++b) {
    cumulative += counts_[b];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[b], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return out;
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\' || c == '"')
      out += {'\\', c};
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

ServerMetrics::ServerMetrics(std::vector<std::string> endpoints)
    : endpoints_(std::move(endpoints)),
      ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void ServerMetrics::request(const std::string& endpoint, int status) {
  const bool known = std::find(endpoints_.begin(), endpoints_.end(), endpoint) != endpoints_.end();
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{known ? endpoint : "other", status}];
}

void ServerMetrics::tokens(int64_t prompt, int64_t generated) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}

void ServerMetrics::cancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  ++cancelled_;
}

void ServerMetrics::first_token(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(s);
}

void ServerMetrics::inter_token(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(s);
}

std::string ServerMetrics::render(const MetricsGauges& g) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out =
      "# HELP zaya_requests_total HTTP requests answered, by endpoint and status.\n"
      "# TYPE zaya_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("zaya_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", escape_label_value(key.first),
                       key.second, n);
  auto counter = [&](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  counter("zaya_prompt_tokens_total", "Prompt tokens of the requests served.", prompt_tokens_);
  counter("zaya_generation_tokens_total", "Tokens generated for the requests served.", generated_tokens_);
  counter("zaya_requests_cancelled_total", "Requests cancelled because their client went away or timed out.",
          cancelled_);
  counter("zaya_prefill_tokens_total", "Prompt tokens the decoder ran (prefill).", g.prefill_tokens);
  counter("zaya_decoder_steps_total", "Forward steps of the decoder.", g.steps);
  counter("zaya_prefix_cache_hit_tokens_total", "Prompt tokens restored from prefix-cache snapshots, not run.",
          g.prefix_hit_tokens);
  counter("zaya_spec_drafts_total", "Speculative drafts checked by the target model.", g.spec_drafts);
  counter("zaya_spec_draft_tokens_total", "Draft tokens checked.", g.spec_drafted);
  counter("zaya_spec_accepted_tokens_total", "Draft tokens accepted (acceptance rate: accepted / draft tokens).",
          g.spec_accepted);
  gauge("zaya_requests_in_flight", "HTTP requests generating now.", g.requests_in_flight);
  gauge("zaya_sequences_running", "Sequences in the running batch.", g.running);
  gauge("zaya_queue_depth", "Sequences waiting for a slot in the batch (or for KV pages).", g.waiting);
  counter("zaya_prefix_cache_evictions_total", "Prefix snapshots evicted to free KV pages.", g.prefix_evictions);
  gauge("zaya_prefix_cache_snapshots", "Prefix snapshots held.", g.prefix_snapshots);
  gauge("zaya_kv_pages", "Pages in the KV pool.", g.kv_pages);
  gauge("zaya_kv_pages_used", "KV pages referenced by running sequences or prefix snapshots.", g.kv_pages_used);
  gauge("zaya_kv_pages_reserved", "KV pages the running sequences may hold at their longest.", g.kv_pages_reserved);
  out += ttft_.render("zaya_time_to_first_token_seconds", "Time from a request's arrival to its first token.");
  out += itl_.render("zaya_inter_token_latency_seconds", "Time between consecutive tokens of a sequence.");
  return out;
}

}  // namespace zaya
