#include "zaya/plan/profile_job.h"

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"
#include "zaya/plan/comm_import.h"

namespace zaya {

std::optional<HardwareProfile> measure_profile_to_file(const ProfileMeasureOptions& options, Comm& world,
                                                       const std::string& out,
                                                       const std::function<void(const std::string&)>& log) {
  ZAYA_CHECK(!out.empty(), "zaya profile measure needs --out FILE");
  HardwareProfile p = measure_profile(options, world, log);
  if (world.rank() != 0) return std::nullopt;
  p.save(out);
  return p;
}

std::vector<CommCurve> add_comm_file(HardwareProfile& profile, const std::string& path, const std::string& scope) {
  const nlohmann::json j = read_json_file(path, "--comm file");
  const std::vector<CommCurve> curves = comm_curves_from_bench_json(j, path, scope);
  merge_comm_curves(profile, curves);
  return curves;
}

void save_validated_profile(const HardwareProfile& profile, const std::string& path) {
  profile.validate(path);
  profile.save(path);
}

}  // namespace zaya
