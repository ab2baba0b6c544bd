#include "zaya/bench/report_metrics.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace zaya {
namespace {

using nlohmann::json;

double number_or_nan(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

// The last component of a directory ("a/b/c" -> "c"), or the working
// directory's name for "" and ".".
std::string last_name(std::filesystem::path dir) {
  dir = dir.lexically_normal();
  if (dir.empty() || dir == ".") {
    std::error_code ec;
    dir = std::filesystem::current_path(ec);
    if (ec) return ".";
  }
  std::string name;
  for (const auto& p : dir)
    if (!p.empty() && p != "/" && p != ".") name = p.string();
  return name.empty() ? dir.string() : name;
}

bool is_metrics_file(const std::filesystem::path& p) { return p.filename() == "metrics.jsonl"; }

}  // namespace

std::string run_label(const std::string& metrics_path) {
  const std::filesystem::path p(metrics_path);
  return is_metrics_file(p) ? last_name(p.parent_path()) : p.stem().string();
}

std::string run_path_label(const std::string& metrics_path) {
  const std::filesystem::path p(metrics_path);
  const std::filesystem::path dir =
      (is_metrics_file(p) ? p.parent_path() : p.parent_path() / p.stem()).lexically_normal();
  std::string text = dir.generic_string();
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  return text.empty() || text == "." ? run_label(metrics_path) : text;
}

RunMetrics read_run_metrics(const json& lines, const std::string& path) {
  RunMetrics run;
  run.label = run_label(path);
  if (!lines.is_array()) return run;
  for (const json& j : lines) {
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number()) continue;
    const double step = j["step"].get<double>();
    if (j.contains("rank_step_seconds") && j["rank_step_seconds"].is_array()) {
      std::vector<double> s;
      for (const json& v : j["rank_step_seconds"])
        if (v.is_number()) s.push_back(v.get<double>());
      if (s.empty()) continue;
      run.rank_steps.push_back(step);
      run.slowest_seconds.push_back(*std::max_element(s.begin(), s.end()));
      run.fastest_seconds.push_back(*std::min_element(s.begin(), s.end()));
      run.ranks = std::max(run.ranks, int64_t(s.size()));
      continue;
    }
    if (j.contains("eval_reward") && j["eval_reward"].is_number()) {
      run.eval_steps.push_back(step);
      run.eval_reward.push_back(j["eval_reward"].get<double>());
      continue;
    }
    if (j.contains("val_loss") && j["val_loss"].is_number()) {
      run.val_steps.push_back(step);
      run.val_loss.push_back(j["val_loss"].get<double>());
      continue;
    }
    if (!j.contains("loss") || !j["loss"].is_number()) continue;
    run.steps.push_back(step);
    run.loss.push_back(j["loss"].get<double>());
    run.lr.push_back(number_or_nan(j, "lr"));
    run.grad_norm.push_back(number_or_nan(j, "grad_norm"));
    run.reward.push_back(number_or_nan(j, "reward_mean"));
    run.kl.push_back(number_or_nan(j, "kl_ref"));
    run.flip_rate.push_back(number_or_nan(j, "flip_rate"));
    run.length.push_back(number_or_nan(j, "response_length"));
    if (!j.contains("routing") || !j["routing"].is_array() || j["routing"].empty()) continue;
    RoutingRecord rec{step, {}};
    for (const json& l : j["routing"]) {
      if (!l.is_object()) continue;
      RoutingLayer layer;
      layer.layer = l.contains("layer") && l["layer"].is_number_integer() ? l["layer"].get<int64_t>()
                                                                          : int64_t(rec.layers.size());
      if (l.contains("load") && l["load"].is_array())
        for (const json& v : l["load"]) layer.load.push_back(v.is_number() ? v.get<double>() : NAN);
      layer.skip = number_or_nan(l, "skip");
      layer.entropy = number_or_nan(l, "entropy");
      rec.layers.push_back(std::move(layer));
    }
    run.routing.push_back(std::move(rec));
  }
  return run;
}

}  // namespace zaya
