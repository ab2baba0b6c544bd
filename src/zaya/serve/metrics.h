#pragma once
// The server's metrics in Prometheus' text exposition format (version 0.0.4):
// request counts by endpoint and status, prompt and generated tokens,
// cancelled requests, and histograms of the time to the first token and of
// the latency between tokens. Gauges (running and waiting sequences) are
// read when the page is drawn. Safe to update from many threads.
// The endpoint label takes one of the routes given at construction or
// "other", so no request can add a series (a path is the client's text), and
// label values are escaped as the format requires (backslash, quote, newline).

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace zaya {

// A Prometheus histogram: cumulative bucket counts, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // The `# TYPE` line and the _bucket / _sum / _count samples of `name`.
  std::string render(const std::string& name, const std::string& help) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative), +Inf last
  double sum_ = 0;
  int64_t count_ = 0;
};

struct MetricsGauges {
  int64_t requests_in_flight = 0;  // HTTP requests generating now
  int64_t running = 0;             // sequences in the batch
  int64_t waiting = 0;             // sequences queued (the queue depth)
  int64_t prefill_tokens = 0;      // prompt tokens the decoder ran
  int64_t steps = 0;               // decoder steps
  int64_t prefix_hit_tokens = 0;   // prompt tokens restored from prefix snapshots
  int64_t prefix_snapshots = 0;    // prefix snapshots held
  int64_t prefix_evictions = 0;    // snapshots evicted to free KV pages
  int64_t kv_pages = 0;            // pages in the KV pool
  int64_t kv_pages_used = 0;       // pages referenced by sequences or snapshots
  int64_t kv_pages_reserved = 0;   // pages the running sequences may hold at their longest
  int64_t spec_drafts = 0;         // speculative decoding: drafts checked,
  int64_t spec_drafted = 0;        // draft tokens checked,
  int64_t spec_accepted = 0;       // and of them accepted
};

// `value` as a label value of the text format: \\, \" and \n escaped.
std::string escape_label_value(const std::string& value);

class ServerMetrics {
 public:
  // `endpoints`: the label values request() keeps; any other endpoint counts as "other".
  explicit ServerMetrics(std::vector<std::string> endpoints = {});
  void request(const std::string& endpoint, int status);
  void tokens(int64_t prompt, int64_t generated);
  void cancelled();
  void first_token(double seconds);
  void inter_token(double seconds);
  std::string render(const MetricsGauges& gauges) const;

 private:
  std::vector<std::string> endpoints_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0, cancelled_ = 0;
  Histogram ttft_, itl_;
};

}  // namespace zaya
