#pragma once
// The training optimizer of ZAYA1 (docs/systems-notes.md §4): Muon with AdamW RMS
// matching on hidden 2-D matrices, AdamW on everything else (embedding, norms,
// biases, scales, temperatures, convolution weights), decoupled weight decay on
// matrices and the embedding only, global-norm gradient clipping.
//
// Muon (Jordan et al. 2024; Moonlight, Liu et al. 2025):
//   m <- mu m + g;  u = g + mu m (Nesterov);  O = NewtonSchulz5(u)
//   W <- W - lr (0.2 sqrt(max(rows, cols)) O + wd W)
// The 0.2 sqrt(max dim) factor gives the update the RMS of a typical AdamW
// update, so one learning rate serves both.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/core/enum_names.h"
#include "zaya/model/params.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya {

// optim.ns_dtype: the Newton-Schulz GEMMs' operands (core/enum_names.h: parsed where the config is read).
enum class NsDtype { kAuto, kBF16, kF32 };
inline constexpr EnumName<NsDtype> kNsDtypeNames[] = {
    {NsDtype::kAuto, "auto"}, {NsDtype::kBF16, "bf16"}, {NsDtype::kF32, "f32"}};

struct OptimizerConfig {
  double lr = 3e-3;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  bool use_muon = true;
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int ns_steps = 5;
  // Newton-Schulz GEMMs in bf16 (as Muon's reference implementation does) or
  // f32. "auto": bf16 where the CPU has native bf16 GEMMs, else f32.
  NsDtype ns_dtype = NsDtype::kAuto;
  double grad_clip = 1.0;  // global gradient-norm clip; 0 disables
  void validate(const std::string& source) const;
};

// Newton-Schulz orthogonalisation of x_OI (in place), quintic coefficients
// (3.4445, -4.7750, 2.0315) as in Muon. scratch: 2*R*C + 2*m*m floats, m = min(R, C);
// scratch16 (R*C + m*m bf16 values) selects bf16 GEMMs (float32 accumulation
// and iterate, their primitives in `gemms`), null selects float32 GEMMs.
void newton_schulz(float* x_OI, int64_t rows, int64_t cols, int steps, float* scratch, uint16_t* scratch16,
                   Bf16GemmCache* gemms = nullptr);

// What update() may also write in its one pass over each owned entry, so
// that the trainer needs no sweeps of its own over the parameters and
// gradients after the update (each a read or write of the whole arena):
struct UpdateExtras {
  // The bf16 copy of the parameters the GEMMs read (same layout as params):
  // bf16(w) of every owned entry after its update, as convert_to_bf16 rounds.
  uint16_t* bf16_params = nullptr;
  // Every owned entry's gradient zeroed once read, ready for the next step's
  // accumulation.
  bool zero_grads = false;
};

class Optimizer {
 public:
  // `owned`: the entries this rank updates (ZeRO-1 shard, dist/zero.h); null: all.
  Optimizer(const ParamTable& table, const OptimizerConfig& config, const std::vector<size_t>* owned = nullptr);

  // One update of every owned parameter, single process: computes the gradient
  // norm, clips, updates. `grads` is the gradient arena (same layout); lr_scale
  // comes from the schedule. Returns the gradient norm before clipping.
  double step(float* params, float* grads, double lr_scale);

  // The pieces of step() for the distributed trainer, which sums the squares
  // over ranks before clipping:
  double owned_sum_squares(const float* grads);
  void update(float* params, float* grads, double lr_scale, double clip_scale, const UpdateExtras& extras = {});

  int64_t step_count() const { return step_; }
  void set_step_count(int64_t s) { step_ = s; }
  // Optimizer state of the owned entries, packed in entry order: AdamW first
  // and second moments (Muon matrices keep their momentum in m; v unused).
  // state_offset(i) is entry i's position in them (-1 if not owned).
  Arena& first_moment() { return m_; }
  Arena& second_moment() { return v_; }
  int64_t state_offset(size_t entry) const { return state_offset_[entry]; }
  const std::vector<size_t>& owned() const { return owned_; }
  const OptimizerConfig& config() const { return config_; }

 private:
  const ParamTable& table_;
  OptimizerConfig config_;
  std::vector<size_t> owned_;
  std::vector<int64_t> state_offset_;
  Arena m_, v_;
  AlignedPtr<float> ns_scratch_;
  AlignedPtr<uint16_t> ns_scratch16_;  // null: Newton-Schulz in float32
  Bf16GemmCache ns_gemms_;             // its bf16 GEMMs' primitives
  std::vector<double> norm_partials_;
  int64_t step_ = 0;
};

}  // namespace zaya
