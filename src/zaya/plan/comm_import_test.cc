#include "zaya/plan/comm_import.h"

#include <gtest/gtest.h>

#include "zaya/core/error.h"
#include "zaya/plan/builtin_profiles.h"
#include "zaya/plan/comm_model.h"

namespace zaya {
namespace {

nlohmann::json bench_doc() {
  auto row = [](double size, double busbw) {
    return nlohmann::json{{"size", size}, {"out_of_place", {{"busbw_gbps", busbw}}}, {"in_place", nullptr}};
  };
  return {{"bench", "comm"},
          {"format_version", 1},
          {"runs",
           {{{"collective", "reduce_scatter"}, {"ranks", 2}, {"rows", {row(1024, 0.5), row(1 << 20, 4.0)}}},
            {{"collective", "send_recv"}, {"ranks", 2}, {"rows", {row(1024, 1.0)}}},
            {{"collective", "broadcast"},
             {"ranks", 2},
             {"rows", {{{"size", 4096}, {"out_of_place", nullptr}, {"in_place", {{"busbw_gbps", 2.0}}}}}}}}}};
}

TEST(CommImport, ReadsBenchCommRunsIntoCurves) {
  const std::vector<CommCurve> curves = comm_curves_from_bench_json(bench_doc(), "c.json", "inter");
  ASSERT_EQ(curves.size(),
            2u);  // send_recv is not a collective the planner uses
  EXPECT_EQ(curves[0].collective, "reduce_scatter");
  EXPECT_EQ(curves[0].points.size(), 2u);
  EXPECT_EQ(curves[0].source, "measured");
  EXPECT_EQ(curves[1].points[0].busbw_gbps, 2.0);  // in place only
  HardwareProfile p = *find_builtin_profile("h100");
  p.devices_per_node = 1;
  merge_comm_curves(p, curves);
  p.validate("merged");
  EXPECT_DOUBLE_EQ(estimate_collective(p, "reduce_scatter", 2, 1 << 20).busbw_gbps, 4.0);
}

TEST(CommImport, RejectsOtherDocuments) {
  nlohmann::json j = bench_doc();
  j["bench"] = "gemm";
  EXPECT_THROW(comm_curves_from_bench_json(j, "c.json", "intra"), Error);
  EXPECT_THROW(comm_curves_from_bench_json(bench_doc(), "c.json", "nearby"), Error);
}

}  // namespace
}  // namespace zaya
