// Fuzz target: model.safetensors.index.json (io/safetensors_dir.h). The input
// is the index; it refers to two fixed, valid shards (fuzz_util.h) in a scratch
// directory, so the fuzzer explores the index parser and its cross-checks
// against the shards. Reads every tensor the opened directory offers.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "zaya/core/error.h"
#include "zaya/io/safetensors_dir.h"

namespace {

std::string& model_dir() {
  static std::string dir = zaya::fuzz::scratch_dir() + "/model";
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::filesystem::create_directories(model_dir());
  zaya::fuzz::write_fixture_shards(model_dir());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zaya::fuzz::write_bytes(model_dir() + "/" + zaya::kSafetensorsIndexFile, data, size);
  try {
    const zaya::SafetensorsDir dir = zaya::SafetensorsDir::open(model_dir());
    std::vector<float> floats;
    std::vector<int32_t> ints;
    for (const std::string& name : dir.names()) {
      if (!dir.has(name)) __builtin_trap();
      const zaya::SafetensorsTensorInfo& info = dir.info(name);
      if (dir.bytes(name).size() != info.nbytes()) __builtin_trap();
      if (info.dtype == zaya::SafetensorsDtype::kI32) {
        ints.resize(static_cast<size_t>(info.numel));
        dir.read_i32(name, ints.data(), info.shape);
      } else {
        floats.resize(static_cast<size_t>(info.numel));
        dir.read_f32(name, floats.data(), info.shape);
      }
    }
  } catch (const zaya::Error&) {
  }
  return 0;
}
