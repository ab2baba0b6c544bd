// The per-row decode attention (infer/cached_attention.cc) alone, at `small`'s
// shape: 4 query heads over 2 KV heads of 64, a paged cache of 16 positions per
// page ([Hk, 16, d] per page, pages in order or shuffled), 8 layers, one query
// row per layer and step; optionally MB of "weights" summed before each layer
// (as the decode step streams a layer's weights between attentions). Prints
// the best thread-CPU time per 8-layer step (CPU time: a loaded machine's
// preemption is left out) and a hash of the outputs (the bits).
//
// Built by bench/attn_decode.sh against any revision's cached_attention.cc
// (-DATTN_CC="path"), with the tree's libzaya_ops and libzaya_core.
//   attn_decode CONTEXT ITERS BF16(0|1) ROWS WEIGHT_MB SHUFFLED(0|1)
#include ATTN_CC

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>

using namespace zaya;

int main(int argc, char** argv) {
  const int64_t ctx = argc > 1 ? atoll(argv[1]) : 1024, iters = argc > 2 ? atoll(argv[2]) : 20;
  const bool bf16 = argc > 3 ? atoi(argv[3]) : 1;
  const int64_t S = argc > 4 ? atoll(argv[4]) : 1;
  const int64_t wfloats = int64_t((argc > 5 ? atof(argv[5]) : 0.0) * 262144);
  const bool shuffled = argc > 6 && atoi(argv[6]);
  const int64_t Hq = 4, Hk = 2, d = 64, L = 8, page = 16, P = ctx, pages = (P + page - 1) / page;
  const int64_t page_elems = Hk * page * d;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> weights(8 * std::max<int64_t>(wfloats, 16), 1.0f);
  volatile float sink = 0;
  std::vector<std::vector<uint16_t>> kb(L), vb(L);
  std::vector<std::vector<float>> kf(L), vf(L);
  std::vector<std::vector<CachedKeySpan>> spans(L);
  for (int l = 0; l < L; ++l) {
    kb[l].resize(pages * page_elems);
    vb[l].resize(pages * page_elems);
    kf[l].resize(pages * page_elems);
    vf[l].resize(pages * page_elems);
    for (size_t i = 0; i < kb[l].size(); ++i) {
      kb[l][i] = float_to_bf16(nd(rng));
      vb[l][i] = float_to_bf16(nd(rng));
      kf[l][i] = bf16_to_float(kb[l][i]);
      vf[l][i] = bf16_to_float(vb[l][i]);
    }
    std::vector<int64_t> where(pages);
    for (int64_t i = 0; i < pages; ++i) where[i] = i;
    if (shuffled) std::shuffle(where.begin(), where.end(), rng);
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t at = where[i] * page_elems, n = std::min(page, P - i * page);
      if (bf16)
        spans[l].push_back({kb[l].data() + at, vb[l].data() + at, page * d, d, i * page, n, true});
      else
        spans[l].push_back({kf[l].data() + at, vf[l].data() + at, page * d, d, i * page, n, false});
    }
  }
  std::vector<float> q(S * Hq * d), o(L * S * Hq * d);
  for (auto& x : q) x = 2 * nd(rng);
  const int64_t per = cached_attention_scratch_floats(Hq / Hk, P, 0, d);
  std::vector<float> scratch(per);
  auto step = [&] {
    for (int l = 0; l < L; ++l) {
      if (wfloats > 0) {
        const float* w = weights.data() + l * wfloats;
        float acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < wfloats; ++i) acc += w[i];
        sink = sink + acc;
      }
      CachedAttentionChunk ch;
      ch.q_SQ = q.data();
      ch.o_SQ = o.data() + l * S * Hq * d;
      ch.spans = spans[l].data();
      ch.span_count = int32_t(spans[l].size());
      ch.past = P - S;
      ch.count = S;
      cached_attention({&ch, 1}, CachedAttentionShape{Hq, Hk, d}, scratch.data(), per, 1);
    }
  };
  for (int i = 0; i < 20; ++i) step();
  double best = 1e9;
  for (int rep = 0; rep < 60; ++rep) {
    timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int64_t i = 0; i < iters; ++i) step();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    best = std::min(best, ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6) / double(iters));
  }
  uint64_t h = 1469598103934665603ull;
  for (float x : o) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    h = (h ^ u) * 1099511628211ull;
  }
  std::printf("best %.4f ms per 8-layer step, hash %016llx\n", best, static_cast<unsigned long long>(h));
}
