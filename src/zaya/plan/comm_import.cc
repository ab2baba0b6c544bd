#include "zaya/plan/comm_import.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

std::vector<CommCurve> comm_curves_from_bench_json(const nlohmann::json& j, const std::string& source,
                                                   const std::string& scope) {
  ZAYA_CHECK_USAGE(scope == "intra" || scope == "inter", "--scope = '{}' is invalid; allowed: intra, inter", scope);
  ZAYA_CHECK(j.is_object() && j.value("bench", "") == "comm",
             "{}: not a `zaya bench comm --json` file ('bench' must be \"comm\")", source);
  ZAYA_CHECK(j.contains("runs") && j["runs"].is_array(), "{}: 'runs' is missing or not an array", source);
  std::vector<CommCurve> out;
  size_t i = 0;
  for (const nlohmann::json& run : j["runs"]) {
    const std::string where = fmt::format("{}: runs[{}]", source, i++);
    ZAYA_CHECK(run.is_object() && run.contains("collective") && run["collective"].is_string(),
               "{}.collective is missing", where);
    const std::string coll = run["collective"].get<std::string>();
    if (coll != "all_reduce" && coll != "reduce_scatter" && coll != "all_gather" && coll != "all_to_all" &&
        coll != "broadcast")
      continue;
    ZAYA_CHECK(run.contains("ranks") && run["ranks"].is_number_integer(), "{}.ranks must be an integer", where);
    CommCurve c;
    c.collective = coll;
    c.ranks = run["ranks"].get<int>();
    c.scope = scope;
    c.source = "measured";
    if (c.ranks < 2) continue;  // one rank: no network
    ZAYA_CHECK(run.contains("rows") && run["rows"].is_array(), "{}.rows must be an array", where);
    for (const nlohmann::json& row : run["rows"]) {
      ZAYA_CHECK(row.contains("size") && row["size"].is_number(), "{}.rows[].size must be a number", where);
      const nlohmann::json* sample = nullptr;
      for (const char* form : {"out_of_place", "in_place"})
        if (sample == nullptr && row.contains(form) && row[form].is_object()) sample = &row[form];
      if (sample == nullptr || !sample->contains("busbw_gbps") || !(*sample)["busbw_gbps"].is_number()) continue;
      const double bytes = row["size"].get<double>(), busbw = (*sample)["busbw_gbps"].get<double>();
      if (bytes <= 0 || busbw <= 0) continue;
      if (!c.points.empty() && bytes <= c.points.back().bytes) continue;
      c.points.push_back({bytes, busbw});
    }
    if (c.points.empty()) continue;
    // Several data types / ops of one collective: keep the first (float sum by
    // default).
    const bool dup = std::any_of(
        out.begin(), out.end(), [&](const CommCurve& o) { return o.collective == c.collective && o.ranks == c.ranks; });
    if (!dup) out.push_back(std::move(c));
  }
  ZAYA_CHECK(!out.empty(),
             "{}: no multi-rank run of all_reduce, reduce_scatter, all_gather, "
             "all_to_all or broadcast "
             "with a measured busbw",
             source);
  return out;
}

void merge_comm_curves(HardwareProfile& p, const std::vector<CommCurve>& curves) {
  for (const CommCurve& c : curves) {
    std::erase_if(p.comm, [&](const CommCurve& o) {
      return o.collective == c.collective && o.ranks == c.ranks && o.scope == c.scope;
    });
    p.comm.push_back(c);
  }
}

}  // namespace zaya
