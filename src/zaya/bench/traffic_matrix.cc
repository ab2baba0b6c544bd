#include "zaya/bench/traffic_matrix.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {

TrafficMatrix uniform_traffic_matrix(int n) {
  ZAYA_CHECK(n >= 1, "a traffic matrix needs at least one rank");
  TrafficMatrix m;
  m.n = n;
  m.w.assign(size_t(n) * size_t(n), 1.0);
  m.source = "uniform";
  return m;
}

TrafficMatrix parse_traffic_matrix(const std::string& text, const std::string& source) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    for (char& c : line)
      if (c == ',' || c == '\t' || c == ';' || c == '\r') c = ' ';
    std::istringstream fields(line);
    std::vector<double> row;
    std::string field;
    while (fields >> field) {
      char* end = nullptr;
      const double v = std::strtod(field.c_str(), &end);
      ZAYA_CHECK(end != field.c_str() && *end == '\0' && std::isfinite(v) && v >= 0,
                 "{}:{}: '{}' is not a non-negative number", source, line_no, field);
      row.push_back(v);
    }
    if (!row.empty()) rows.push_back(std::move(row));
  }
  ZAYA_CHECK(!rows.empty(), "{}: no matrix rows (expected n lines of n numbers)", source);
  const int n = int(rows.size());
  TrafficMatrix m;
  m.n = n;
  m.source = source;
  double total = 0;
  for (int i = 0; i < n; ++i) {
    ZAYA_CHECK(int(rows[i].size()) == n, "{}: row {} has {} entries; a matrix of {} rows needs {} per row", source,
               i + 1, rows[i].size(), n, n);
    for (double v : rows[i]) {
      m.w.push_back(v);
      total += v;
    }
  }
  ZAYA_CHECK(total > 0, "{}: the matrix is all zeros", source);
  return m;
}

TrafficMatrix read_traffic_matrix(const std::string& path) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "{}: cannot open the traffic matrix", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_traffic_matrix(buffer.str(), path);
}

std::string format_traffic_matrix(const TrafficMatrix& m) {
  std::string out = fmt::format("# all_to_all_v traffic matrix, {} ranks (row = sender), from {}\n", m.n, m.source);
  for (int i = 0; i < m.n; ++i) {
    for (int j = 0; j < m.n; ++j) out += fmt::format("{}{:.6g}", j ? " " : "", m.at(i, j));
    out += "\n";
  }
  return out;
}

namespace {

std::vector<double> rank_loads(const std::vector<double>& load, int ep) {
  const int experts = int(load.size()), per_rank = experts / ep;
  std::vector<double> out(size_t(ep), 0.0);
  for (int e = 0; e < experts; ++e) out[size_t(e / per_rank)] += load[size_t(e)];
  return out;
}

}  // namespace

TrafficMatrix traffic_matrix_from_routing(const std::string& path, int ep, const RoutingSelection& sel) {
  ZAYA_CHECK(ep >= 1, "expert-parallel size must be at least 1, got {}", ep);
  ZAYA_CHECK(std::ifstream(path).good(), "{}: cannot open the training metrics", path);
  nlohmann::json chosen;
  std::string where;
  read_json_lines(path, [&](nlohmann::json&& j, const std::string& at) {
    if (!j.is_object() || !j.contains("routing") || !j["routing"].is_array() || j["routing"].empty()) return true;
    if (sel.step >= 0 && !(j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() == sel.step))
      return true;
    chosen = std::move(j);
    where = at;
    return sel.step < 0;  // a chosen step: found; otherwise the last one with routing
  });
  ZAYA_CHECK(!chosen.is_null(), "{}: no line with routing loads{} (zaya train writes them to OUT_DIR/metrics.jsonl)",
             path, sel.step >= 0 ? fmt::format(" for step {}", sel.step) : "");

  // Per-layer loads, validated.
  std::vector<std::pair<int64_t, std::vector<double>>> layers;
  for (const auto& rec : chosen["routing"]) {
    ZAYA_CHECK(rec.is_object() && rec.contains("load") && rec["load"].is_array() && !rec["load"].empty(),
               "{}: a routing record lacks its 'load' array", where);
    std::vector<double> load;
    for (const auto& v : rec["load"]) {
      ZAYA_CHECK(v.is_number() && v.get<double>() >= 0, "{}: routing loads must be non-negative numbers", where);
      load.push_back(v.get<double>());
    }
    const int64_t layer = rec.contains("layer") && rec["layer"].is_number_integer() ? rec["layer"].get<int64_t>()
                                                                                    : int64_t(layers.size());
    if (!layers.empty())
      ZAYA_CHECK(load.size() == layers.front().second.size(), "{}: layer {} has {} experts, layer {} has {}", where,
                 layer, load.size(), layers.front().first, layers.front().second.size());
    layers.emplace_back(layer, std::move(load));
  }
  const int experts = int(layers.front().second.size());
  ZAYA_CHECK(experts % ep == 0, "{}: {} experts cannot be split evenly over an expert-parallel size of {}", where,
             experts, ep);

  std::vector<double> load(size_t(experts), 0.0);
  std::string layer_name;
  if (sel.layer == "mean") {
    for (const auto& [layer, l] : layers)
      for (int e = 0; e < experts; ++e) load[size_t(e)] += l[size_t(e)] / double(layers.size());
    layer_name = fmt::format("mean of {} layers", layers.size());
  } else if (sel.layer == "max") {
    double worst = -1;
    for (const auto& [layer, l] : layers) {
      const std::vector<double> per_rank = rank_loads(l, ep);
      double total = 0, peak = 0;
      for (double v : per_rank) {
        total += v;
        peak = std::max(peak, v);
      }
      const double ratio = total > 0 ? peak * double(ep) / total : 0;
      if (ratio > worst) {
        worst = ratio;
        load = l;
        layer_name = fmt::format("{} (most imbalanced: busiest rank {:.2f}x the mean)", layer, ratio);
      }
    }
  } else {
    char* end = nullptr;
    const long long want = std::strtoll(sel.layer.c_str(), &end, 10);
    ZAYA_CHECK(end != sel.layer.c_str() && *end == '\0', "routing layer '{}' must be a layer number, mean or max",
               sel.layer);
    bool found = false;
    std::string available;
    for (const auto& [layer, l] : layers) {
      available += fmt::format("{}{}", available.empty() ? "" : ", ", layer);
      if (layer == want) {
        load = l;
        found = true;
      }
    }
    ZAYA_CHECK(found, "{}: no routing record for layer {}; layers: {}", where, want, available);
    layer_name = sel.layer;
  }

  const std::vector<double> per_rank = rank_loads(load, ep);
  double total = 0;
  for (double v : per_rank) total += v;
  ZAYA_CHECK(total > 0, "{}: the selected routing loads are all zero", where);
  TrafficMatrix m;
  m.n = ep;
  m.w.resize(size_t(ep) * size_t(ep));
  for (int i = 0; i < ep; ++i)
    for (int j = 0; j < ep; ++j) m.w[size_t(i) * size_t(ep) + size_t(j)] = per_rank[size_t(j)];
  const int64_t step =
      chosen.contains("step") && chosen["step"].is_number_integer() ? chosen["step"].get<int64_t>() : -1;
  m.source = fmt::format("routing {} step {} layer {}, {} experts over {} ranks", path, step, layer_name, experts, ep);
  return m;
}

std::vector<int64_t> scale_traffic(const TrafficMatrix& m, int64_t elems_per_rank) {
  const size_t nn = size_t(m.n) * size_t(m.n);
  double total = 0;
  for (double v : m.w) total += v;
  ZAYA_CHECK(total > 0, "the traffic matrix from {} is all zeros", m.source);
  const double scale = double(elems_per_rank) * double(m.n) / total;
  std::vector<int64_t> counts(nn);
  for (size_t i = 0; i < nn; ++i) counts[i] = int64_t(std::floor(m.w[i] * scale));
  return counts;
}

TrafficLoad traffic_load(const std::vector<int64_t>& counts, int n) {
  TrafficLoad load;
  int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    int64_t sent = 0, received = 0, self = counts[size_t(r) * size_t(n) + size_t(r)];
    for (int p = 0; p < n; ++p) {
      sent += counts[size_t(r) * size_t(n) + size_t(p)];
      received += counts[size_t(p) * size_t(n) + size_t(r)];
    }
    total += sent;
    load.max_rank_elems = std::max({load.max_rank_elems, sent, received});
    load.max_rank_remote_elems = std::max({load.max_rank_remote_elems, sent - self, received - self});
  }
  const double mean = double(total) / double(n);
  load.imbalance = mean > 0 ? double(load.max_rank_elems) / mean : 1.0;
  return load;
}

}  // namespace zaya
