#include "zaya/plan/comm_model.h"

#include <cmath>
#include <limits>

#include "zaya/core/error.h"

namespace zaya {

double comm_busbw_factor(const std::string& c, int n) {
  if (n <= 1) return 1;
  if (c == "all_reduce") return 2.0 * (n - 1) / n;
  if (c == "reduce_scatter" || c == "all_gather" || c == "all_to_all") return double(n - 1) / n;
  if (c == "broadcast") return 1;
  fail(
      "unknown collective '{}'; allowed: all_reduce, reduce_scatter, "
      "all_gather, all_to_all, broadcast",
      c);
}

CommEstimate estimate_collective(const HardwareProfile& p, const std::string& collective, int ranks, double bytes) {
  CommEstimate e;
  if (ranks <= 1 || bytes <= 0) return e;
  const std::string scope = ranks <= p.devices_per_node ? "intra" : "inter";
  double best = std::numeric_limits<double>::infinity();
  for (const CommCurve& c : p.comm) {
    if (c.collective != collective) continue;
    // A curve of the other scope counts as 4 doublings away: used only when
    // nothing else fits.
    const double d = std::abs(std::log(double(c.ranks) / ranks)) + (c.scope == scope ? 0 : 4 * std::log(2.0));
    if (d < best) {
      best = d;
      e.curve = &c;
    }
  }
  if (e.curve == nullptr) {
    e.missing = true;
    return e;
  }
  const auto& pts = e.curve->points;
  const double factor = comm_busbw_factor(collective, ranks);
  if (bytes <= pts.front().bytes) {
    // Latency-bound: the smallest measured message's time.
    e.busbw_gbps = pts.front().busbw_gbps * bytes / pts.front().bytes;
    e.seconds = pts.front().bytes / (pts.front().busbw_gbps / factor * 1e9);
    return e;
  }
  if (bytes >= pts.back().bytes) {
    e.busbw_gbps = pts.back().busbw_gbps;
  } else {
    size_t i = 1;
    while (pts[i].bytes < bytes) ++i;
    const double x0 = std::log(pts[i - 1].bytes), x1 = std::log(pts[i].bytes), x = std::log(bytes);
    const double w = (x - x0) / (x1 - x0);
    e.busbw_gbps = std::exp((1 - w) * std::log(pts[i - 1].busbw_gbps) + w * std::log(pts[i].busbw_gbps));
  }
  e.seconds = bytes / (e.busbw_gbps / factor * 1e9);
  return e;
}

}  // namespace zaya
