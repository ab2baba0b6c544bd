#pragma once
// bfloat16 GEMMs with float32 results through oneDNN's matmul primitive, which
// uses AMX or AVX512-BF16 where the CPU has them (on 2 cores: Intel AMX about
// 2 TFLOP/s against 0.35 for float32; whether bf16 pays depends on the CPU,
// bf16_gemm_outruns_f32 below). Where oneDNN has no bf16 matmul at all
// (AVX2-only CPUs) the operands are widened and a float32 matmul runs: the
// same bf16-operand, float32-accumulation product, slower than float32 (a B
// operand over 64 MB widened is split into blocks of N or K).
// Used where bf16 inputs are the accepted practice: Muon's Newton-Schulz
// iteration and the linear layers of mixed-precision training
// (ops/bf16_linear.h). Primitives are created once per shape and cached in
// a Bf16GemmCache that the caller owns (a workspace's Bf16Context, Muon's
// optimizer, a benchmark): no process-wide state.

#include <array>
#include <cstdint>
#include <memory>

namespace zaya {

// The oneDNN primitives built for each GEMM shape (JIT-compiled once, then
// only their data pointers change), and the widened operands of the float32
// fallback. Calls through one cache are serialised by its lock.
class Bf16GemmCache {
 public:
  Bf16GemmCache();
  ~Bf16GemmCache();
  Bf16GemmCache(Bf16GemmCache&&) noexcept;
  Bf16GemmCache& operator=(Bf16GemmCache&&) noexcept;

  // For tests: from now on build every GEMM of this cache as the float32
  // fallback that CPUs without oneDNN bf16 matmuls run (operands widened
  // first), or (false) as oneDNN's bf16 matmul where it has one. Clears the
  // cached primitives.
  void force_widened(bool on);

  struct State;  // matmul_bf16.cc
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

// C[M,N] = op(A)[M,K] * op(B)[K,N]; A, B bf16 bit patterns, row-major with
// row strides lda/ldb (of the stored, untransposed matrices); C float32.
// accumulate: C += op(A) op(B) (float32 accumulation into C). Call it outside
// parallel regions; the primitive comes from `cache`.
void gemm_bf16(Bf16GemmCache& cache, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate = false);

// One operand of matmul_bf16_batched: up to three batch dims, then the
// matrix's [rows, cols], each with its stride in elements (a transposed
// operand is the stored matrix read with strides {1, ld}; unused leading batch
// dims are 1). A batch dim of 1 in `b` is broadcast over `a` and `c` (grouped
// KV heads: one K for the G query heads of a group).
struct BatchedMatrix {
  std::array<int64_t, 5> dims{};
  std::array<int64_t, 5> strides{};
};

// C[i] (+)= A[i] B[i] for every batch index i, bf16 A and B, float32 C
// (float32 accumulation). One oneDNN matmul per call; primitives are cached by
// the three layouts. Call it outside parallel regions. oneDNN's AMX kernels
// take dense batches (batch strides equal to the matrix sizes); other strides
// run a slower kernel (ops/attention_bf16.cc copies slices to keep them dense).
void matmul_bf16_batched(Bf16GemmCache& cache, const BatchedMatrix& a, const uint16_t* A, const BatchedMatrix& b,
                         const uint16_t* B, const BatchedMatrix& c, float* C, bool accumulate = false);

// True when this CPU runs bf16 GEMMs natively (AVX512-BF16 or AMX); without
// them bf16 is emulated (by oneDNN on AVX-512, by widening on AVX2), slower than float32.
bool bf16_gemm_is_native();

// What `auto` picks (train.precision, optim.ns_dtype): bf16 GEMMs only where
// they outrun float32 ones. Native is not enough (docs/performance.md, "GEMM
// peak", measured with `zaya bench gemm`):
//   AMX tiles (Intel Sapphire Rapids and later): about 6x float32;
//   AVX512-BF16 on AMD Zen 4/5: 1.9x (two bf16 products per float32 FMA slot);
//   AVX512-BF16 on Intel without AMX (Cooper Lake, or AMX hidden by a
//   hypervisor): 0.5x, since its one bf16 dot-product port does no more
//   work per cycle than its two FMA ports and oneDNN repacks the operands;
//   no native bf16: emulated, slower still.
// The rule reads only what the CPU reports, so a config gives the same
// numbers on every machine of one kind (a timed choice would not).
enum class Bf16Isa { kNone, kAvx512Bf16, kAmx };
bool bf16_gemm_outruns_f32(Bf16Isa isa, bool amd_cpu);
// The rule for this CPU (oneDNN's effective ISA, the CPUID vendor).
bool bf16_gemm_outruns_f32();

// dst[i] = bf16(src[i]) (round to nearest even), in parallel.
void convert_to_bf16(uint16_t* dst, const float* src, int64_t n);

}  // namespace zaya
