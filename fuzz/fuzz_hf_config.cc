// Fuzz target: config.json of a Hugging Face-style ZAYA directory
// (formats/hf_config.h). Inputs that are not JSON are skipped (nlohmann's parser
// is not ours to fuzz); the rest go through config_from_hf_json, and every
// config it accepts must survive a write/read round trip unchanged.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "zaya/core/error.h"
#include "zaya/formats/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  try {
    const zaya::ZayaConfig config = zaya::config_from_hf_json(json, "config.json");
    const nlohmann::json written = zaya::config_to_hf_json(config, "float32");
    const zaya::ZayaConfig again = zaya::config_from_hf_json(written, "round trip");
    if (zaya::config_to_hf_json(again, "float32") != written) __builtin_trap();
  } catch (const zaya::Error&) {
  }
  return 0;
}
