#include "zaya/ops/matmul_bf16.h"

#include <cpuid.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <tuple>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/library_call.h"
#include "zaya/ops/parallel_for.h"

namespace zaya {

using dnnl::memory;

// One primitive and its three memory objects per GEMM shape, built on first
// use; later calls only swap the data pointers (no allocation).
// On a CPU where oneDNN has no bf16 matmul (AVX2 only: oneDNN 2.x needs at
// least AVX-512 for bf16) the primitive is a float32 one and `widened` is
// set: run() first widens the bf16 operands into float32 scratch (exact: every
// bf16 value is a float32 value), so the product is still bf16 operands with
// float32 accumulation, only slower than float32 GEMMs (`auto` picks float32
// there). a_span, b_span: elements from the operand's first to its last.
struct Bf16Gemm {
  dnnl::matmul primitive;
  memory a, b, c;
  bool widened = false;
  int64_t a_span = 0, b_span = 0;
};

struct Bf16GemmCache::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;
  std::map<Key, Bf16Gemm> cache;
  using BatchedKey = std::array<int64_t, 31>;  // dims and strides of a, b, c; accumulate
  std::map<BatchedKey, Bf16Gemm> batched;
  // The widened operands of the float32 fallback, grown to the largest GEMM
  // on first use and shared by all shapes (calls hold the mutex).
  std::vector<float> a_f32, b_f32;
  bool force_widened = false;  // Bf16GemmCache::force_widened
  int native = -1;             // oneDNN builds bf16 matmuls here: 1 yes, 0 no, -1 not probed yet
};

namespace {

using Context = Bf16GemmCache::State;

// The largest B operand the fallback widens in one call (64 MB of float32): a
// bigger one (an LM head of 262,144 x 2,048) is split into blocks of N (B
// transposed, as weights are) or of K, so its scratch stays small.
constexpr int64_t kMaxWidenedB = int64_t(1) << 24;

// One operand's dims and strides (elements).
struct Layout {
  memory::dims dims, strides;
  memory::desc desc(memory::data_type dt) const { return memory::desc(dims, dt, strides); }
  // Elements from the first to the last: 1 + sum (dim - 1) * stride.
  int64_t span() const {
    int64_t n = 1;
    for (size_t d = 0; d < dims.size(); ++d) n += (dims[d] - 1) * strides[d];
    return n;
  }
};

// Logical [rows, cols] view of a row-major matrix stored untransposed with
// leading dimension ld (transposed: stored [cols, rows]).
Layout view(int64_t rows, int64_t cols, int64_t ld, bool transposed) {
  return Layout{{rows, cols}, transposed ? memory::dims{1, ld} : memory::dims{ld, 1}};
}

dnnl::matmul::primitive_desc matmul_pd(const Context& ctx, const memory::desc& a_md, const memory::desc& b_md,
                                       const memory::desc& c_md, bool accumulate) {
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attr.set_post_ops(sum);
  }
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, ctx.engine);
}

// The primitive C (+)= A B for these layouts (bf16 A and B, float32 C): oneDNN's
// bf16 matmul, or where this CPU has none (or the tests force it) the float32
// one on widened operands. Throws dnnl::error when neither builds.
Bf16Gemm build(const Context& ctx, const Layout& a, const Layout& b, const Layout& c, bool accumulate) {
  const auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
  const memory::desc c_md = c.desc(f32);
  if (!ctx.force_widened) {
    try {
      auto pd = matmul_pd(ctx, a.desc(bf16), b.desc(bf16), c_md, accumulate);
      return Bf16Gemm{dnnl::matmul(pd), memory(a.desc(bf16), ctx.engine, nullptr),
                      memory(b.desc(bf16), ctx.engine, nullptr), memory(c_md, ctx.engine, nullptr)};
    } catch (const dnnl::error&) {  // no bf16 matmul on this CPU: the fallback below
    }
  }
  Bf16Gemm g{dnnl::matmul(matmul_pd(ctx, a.desc(f32), b.desc(f32), c_md, accumulate)),
             memory(a.desc(f32), ctx.engine, nullptr), memory(b.desc(f32), ctx.engine, nullptr),
             memory(c_md, ctx.engine, nullptr)};
  g.widened = true;
  g.a_span = a.span();
  g.b_span = b.span();
  return g;
}

// dst[i] = src[i] widened to float32, in parallel.
void widen(float* dst, const uint16_t* src, int64_t n) {
  parallel_for(n, 2 * n, [&](int64_t i) { dst[i] = bf16_to_float(src[i]); });
}

void run(Context& ctx, Bf16Gemm& g, const uint16_t* A, const uint16_t* B, float* C) {
  if (g.widened) {
    if (ctx.a_f32.size() < size_t(g.a_span)) ctx.a_f32.resize(size_t(g.a_span));
    if (ctx.b_f32.size() < size_t(g.b_span)) ctx.b_f32.resize(size_t(g.b_span));
    widen(ctx.a_f32.data(), A, g.a_span);
    widen(ctx.b_f32.data(), B, g.b_span);
    g.a.set_data_handle(ctx.a_f32.data());
    g.b.set_data_handle(ctx.b_f32.data());
  } else {
    g.a.set_data_handle(const_cast<uint16_t*>(A));
    g.b.set_data_handle(const_cast<uint16_t*>(B));
  }
  g.c.set_data_handle(C);
  g.primitive.execute(ctx.stream, {{DNNL_ARG_SRC, g.a}, {DNNL_ARG_WEIGHTS, g.b}, {DNNL_ARG_DST, g.c}});
  ctx.stream.wait();
}

// Whether bf16 GEMMs take the widened fallback (call under ctx.mutex).
bool widened(Context& ctx) {
  if (ctx.force_widened) return true;
  if (ctx.native < 0) {
    try {
      const Layout probe = view(16, 16, 16, false);
      matmul_pd(ctx, probe.desc(memory::data_type::bf16), probe.desc(memory::data_type::bf16),
                probe.desc(memory::data_type::f32), false);
      ctx.native = 1;
    } catch (const dnnl::error&) {
      ctx.native = 0;
    }
  }
  return ctx.native == 0;
}

}  // namespace

Bf16GemmCache::Bf16GemmCache() : state_(std::make_unique<State>()) {}
Bf16GemmCache::~Bf16GemmCache() = default;
Bf16GemmCache::Bf16GemmCache(Bf16GemmCache&&) noexcept = default;
Bf16GemmCache& Bf16GemmCache::operator=(Bf16GemmCache&&) noexcept = default;

void Bf16GemmCache::force_widened(bool on) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->force_widened = on;
  state_->cache.clear();
  state_->batched.clear();
}

void gemm_bf16(Bf16GemmCache& cache, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // oneDNN rejects K = 0; the product is empty.
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill_n(C + i * ldc, N, 0.0f);
    return;
  }
  Context& ctx = cache.state();
  std::unique_lock<std::mutex> lock(ctx.mutex);
  const bool split = widened(ctx) && N * K > kMaxWidenedB && (trans_b ? N : K) > 1;
  if (split) lock.unlock();  // each block locks again
  if (split && trans_b) {    // B [N, K]: blocks of its rows, each a block of C's columns
    const int64_t nb = std::max<int64_t>(1, kMaxWidenedB / K);
    for (int64_t n0 = 0; n0 < N; n0 += nb)
      gemm_bf16(cache, trans_a, true, M, std::min(nb, N - n0), K, A, lda, B + n0 * ldb, ldb, C + n0, ldc, accumulate);
    return;
  }
  if (split) {  // B [K, N]: blocks of K, summed into C
    const int64_t kb = std::max<int64_t>(1, kMaxWidenedB / N);
    for (int64_t k0 = 0; k0 < K; k0 += kb)
      gemm_bf16(cache, trans_a, false, M, N, std::min(kb, K - k0), trans_a ? A + k0 * lda : A + k0, lda, B + k0 * ldb,
                ldb, C, ldc, accumulate || k0 > 0);
    return;
  }
  LibraryCall library_call;
  const Context::Key key{trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate};
  auto it = ctx.cache.find(key);
  if (it == ctx.cache.end()) {
    try {
      it = ctx.cache
               .emplace(key, build(ctx, view(M, K, lda, trans_a), view(K, N, ldb, trans_b), view(M, N, ldc, false),
                                   accumulate))
               .first;
    } catch (const dnnl::error& e) {
      fail("oneDNN cannot build a bf16 (or widened float32) matmul {}x{}x{} on this CPU: {}", M, N, K, e.what());
    }
  }
  run(ctx, it->second, A, B, C);
}

void matmul_bf16_batched(Bf16GemmCache& cache, const BatchedMatrix& a, const uint16_t* A, const BatchedMatrix& b,
                         const uint16_t* B, const BatchedMatrix& c, float* C, bool accumulate) {
  for (int64_t n : c.dims)
    if (n == 0) return;
  ZAYA_ASSERT(a.dims[4] > 0);
  Context& ctx = cache.state();
  std::lock_guard<std::mutex> lock(ctx.mutex);
  LibraryCall library_call;
  Context::BatchedKey key{};
  size_t k = 0;
  for (const BatchedMatrix* m : {&a, &b, &c}) {
    for (int64_t v : m->dims) key[k++] = v;
    for (int64_t v : m->strides) key[k++] = v;
  }
  key[k] = accumulate ? 1 : 0;
  auto it = ctx.batched.find(key);
  if (it == ctx.batched.end()) {
    auto layout = [](const BatchedMatrix& m) {
      return Layout{memory::dims(m.dims.begin(), m.dims.end()), memory::dims(m.strides.begin(), m.strides.end())};
    };
    try {
      it = ctx.batched.emplace(key, build(ctx, layout(a), layout(b), layout(c), accumulate)).first;
    } catch (const dnnl::error& e) {
      fail("oneDNN cannot build a batched bf16 (or widened float32) matmul ({}x{} by {}x{}) on this CPU: {}", a.dims[3],
           a.dims[4], b.dims[3], b.dims[4], e.what());
    }
  }
  run(ctx, it->second, A, B, C);
}

bool bf16_gemm_is_native() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

bool bf16_gemm_outruns_f32(Bf16Isa isa, bool amd_cpu) {
  switch (isa) {
    case Bf16Isa::kAmx: return true;
    case Bf16Isa::kAvx512Bf16: return amd_cpu;
    case Bf16Isa::kNone: return false;
  }
  return false;
}

bool bf16_gemm_outruns_f32() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const Bf16Isa kind = isa == dnnl::cpu_isa::avx512_core_amx    ? Bf16Isa::kAmx
                       : isa == dnnl::cpu_isa::avx512_core_bf16 ? Bf16Isa::kAvx512Bf16
                                                                : Bf16Isa::kNone;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  char vendor[13] = {};
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {  // the vendor string is EBX, EDX, ECX
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
  }
  return bf16_gemm_outruns_f32(kind, std::string_view(vendor) == "AuthenticAMD");
}

void convert_to_bf16(uint16_t* dst, const float* src, int64_t n) {
  parallel_for(n, 2 * n, [&](int64_t i) { dst[i] = float_to_bf16(src[i]); });
}

}  // namespace zaya
