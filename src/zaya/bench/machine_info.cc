#include "zaya/bench/machine_info.h"

#include <omp.h>
#include <unistd.h>

#include <fstream>
#include <oneapi/dnnl/dnnl.hpp>

namespace zaya {
namespace {

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

MachineInfo machine_info() {
  MachineInfo m;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  m.host = host;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) m.cpu = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  m.logical_cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
  m.page_size = sysconf(_SC_PAGESIZE);
  m.memory_gib = double(sysconf(_SC_PHYS_PAGES)) * double(m.page_size) / double(1 << 30);
  m.isa = isa_name(dnnl::get_effective_cpu_isa());
  m.omp_threads = omp_get_max_threads();
  return m;
}

nlohmann::json machine_json(const MachineInfo& m) {
  return {{"host", m.host},           {"cpu", m.cpu}, {"logical_cpus", m.logical_cpus}, {"memory_gib", m.memory_gib},
          {"page_size", m.page_size}, {"isa", m.isa}, {"omp_threads", m.omp_threads}};
}

}  // namespace zaya
