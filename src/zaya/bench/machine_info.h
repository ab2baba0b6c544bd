#pragma once
// What the benchmarks ran on, for their JSON and the report: host, CPU model,
// logical CPUs, memory, page size, the oneDNN ISA and the OpenMP threads.

#include <nlohmann/json.hpp>
#include <string>

namespace zaya {

struct MachineInfo {
  std::string host;
  std::string cpu;  // /proc/cpuinfo "model name"
  int logical_cpus = 0;
  double memory_gib = 0;
  long page_size = 4096;
  std::string isa;  // oneDNN's effective ISA, e.g. avx512_core_amx
  int omp_threads = 0;
};

MachineInfo machine_info();
nlohmann::json machine_json(const MachineInfo& m);

}  // namespace zaya
