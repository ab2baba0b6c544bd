#pragma once
// Test-only: the golden model and batch of tests/data/golden (made by
// tools/make_golden.py), shared by golden_test.cc and mixed_precision_test.cc.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zaya/formats/hf_checkpoint.h"
#include "zaya/io/safetensors_file.h"
#include "zaya/model/model.h"

namespace zaya {

inline const std::string kGoldenDir = std::string(ZAYA_TEST_DATA_DIR) + "/golden";

// The model, its input ids and targets [B, S], and the reference tensors by name.
struct Golden {
  std::unique_ptr<ZayaModel> model = load_hf_model(kGoldenDir);
  SafetensorsFile file = SafetensorsFile::open(kGoldenDir + "/golden.safetensors");
  int64_t B = 0, S = 0;
  std::vector<int32_t> ids, targets;
  Golden() {
    const auto& shape = file.info("input_ids").shape;
    B = shape[0];
    S = shape[1];
    ids.resize(B * S);
    targets.resize(B * S);
    file.read_i32("input_ids", ids.data(), {B, S});
    file.read_i32("targets", targets.data(), {B, S});
  }
  std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(n);
    file.read_f32(name, v.data(), shape);
    return v;
  }
};

}  // namespace zaya
