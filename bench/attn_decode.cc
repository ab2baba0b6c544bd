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
// KV8=1 (-DATTN_KV8, the tree's file only): the per-row path over int8 copies
// of the K and V pages instead, one f32 scale per row (bench/attn_decode_kv8.h,
// a prototype), quantized from the f32 values the bf16 cache rounds; it prints
// the largest difference of its output from the current path's over the bf16
// cache, and both outputs' errors against an f64 reference over the f32 values
// (max |o - ref| / max |ref| and rms(o - ref) / rms(ref)). KV8 2: its VNNI
// scores instead (AVX-512 VNNI builds). DATA 1: keys with 4 outlier channels
// per head (5, 21, 37, 53: mean 10, sd 3; the others N(0, 1)) and values with
// one channel of sd 5, as real caches have; 0: every element N(0, 1).
//   attn_decode CONTEXT ITERS BF16(0|1) ROWS WEIGHT_MB SHUFFLED(0|1) [KV8(0|1|2) [DATA(0|1)]]
#include ATTN_CC
#ifdef ATTN_KV8
#include "attn_decode_kv8.h"
#endif

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
  const int kv8 = argc > 7 ? atoi(argv[7]) : 0;  // 1: widened int8 and FMAs, 2: VNNI scores
  const bool outliers = argc > 8 && atoi(argv[8]);
#ifndef __AVX512VNNI__
  if (kv8 == 2) {
    std::fprintf(stderr, "KV8 2 (VNNI scores) needs an AVX-512 VNNI build\n");
    return 1;
  }
#endif
  const int64_t Hq = 4, Hk = 2, d = 64, L = 8, page = 16, P = ctx, pages = (P + page - 1) / page;
  const int64_t page_elems = Hk * page * d;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> weights(8 * std::max<int64_t>(wfloats, 16), 1.0f);
  volatile float sink = 0;
  std::vector<std::vector<uint16_t>> kb(L), vb(L);
  std::vector<std::vector<float>> kf(L), vf(L);
  std::vector<std::vector<CachedKeySpan>> spans(L);
  std::vector<std::vector<float>> xk(L), xv(L);  // the f32 values (the bf16 cache rounds them)
  std::vector<std::vector<int64_t>> where_l(L);  // logical page -> physical page
#ifdef ATTN_KV8
  std::vector<std::vector<int8_t>> kq(L), vq(L),
      ku(L);  // ku: kq offset as uint8 (k8 + 128), for VNNI  // int8 pages [Hk][page][d], scales [Hk][page] per page
  std::vector<std::vector<float>> ksc(L), vsc(L);
  std::vector<std::vector<Kv8Span>> spans8(L), spans8u(L);
#endif
  for (int l = 0; l < L; ++l) {
    kb[l].resize(pages * page_elems);
    vb[l].resize(pages * page_elems);
    kf[l].resize(pages * page_elems);
    vf[l].resize(pages * page_elems);
    xk[l].resize(pages * page_elems);
    xv[l].resize(pages * page_elems);
    for (size_t i = 0; i < kb[l].size(); ++i) {
      xk[l][i] = nd(rng);
      xv[l][i] = nd(rng);
      if (outliers) {
        const int64_t c = int64_t(i) % d, j = int64_t(i) / (page * d) % Hk;
        if (c % 16 == 5) xk[l][i] = 3 * xk[l][i] + 10.0f;  // 4 channels per head
        if (c == 9 + 7 * j) xv[l][i] *= 5;
      }
      kb[l][i] = float_to_bf16(xk[l][i]);
      vb[l][i] = float_to_bf16(xv[l][i]);
      kf[l][i] = bf16_to_float(kb[l][i]);
      vf[l][i] = bf16_to_float(vb[l][i]);
    }
    std::vector<int64_t> where(pages);
    for (int64_t i = 0; i < pages; ++i) where[i] = i;
    if (shuffled) std::shuffle(where.begin(), where.end(), rng);
    where_l[l] = where;
#ifdef ATTN_KV8
    kq[l].resize(pages * page_elems);
    vq[l].resize(pages * page_elems);
    ksc[l].resize(pages * Hk * page);
    vsc[l].resize(pages * Hk * page);
    for (int64_t r = 0; r < pages * Hk * page; ++r) {  // row r: page r / (Hk page), head, position
      ksc[l][r] = quantize_row_i8(xk[l].data() + r * d, d, kq[l].data() + r * d);
      vsc[l][r] = quantize_row_i8(xv[l].data() + r * d, d, vq[l].data() + r * d);
    }
    ku[l].resize(kq[l].size());
    for (size_t i = 0; i < kq[l].size(); ++i) ku[l][i] = int8_t(uint8_t(kq[l][i]) ^ 0x80);
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t at = where[i] * page_elems, sat = where[i] * Hk * page, n = std::min(page, P - i * page);
      spans8[l].push_back({kq[l].data() + at, vq[l].data() + at, ksc[l].data() + sat, vsc[l].data() + sat, page * d, d,
                           page, i * page, n});
      spans8u[l].push_back(spans8[l].back());
      spans8u[l].back().k = ku[l].data() + at;
    }
#endif
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
  auto step = [&](int use_kv8) {
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
#ifdef ATTN_KV8
      if (use_kv8) {
        const auto& sp8 = use_kv8 == 2 ? spans8u[l] : spans8[l];
        for (int64_t j = 0; j < Hk; ++j)
          rows_task_kv8(ch, sp8.data(), int32_t(sp8.size()), CachedAttentionShape{Hq, Hk, d}, j, scratch.data(),
                        use_kv8 == 2);
        continue;
      }
#endif
      cached_attention({&ch, 1}, CachedAttentionShape{Hq, Hk, d}, scratch.data(), per, 1);
    }
  };
  // Errors: each layer's rows against an f64 reference over the f32 values.
  // err(out) = {max |out - ref| / max |ref|, rms(out - ref) / rms(ref)}.
  std::vector<double> ref(o.size());
  for (int l = 0; l < L; ++l)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t hq = 0; hq < Hq; ++hq) {
        const int64_t pos = P - S + i, j = hq / (Hq / Hk);
        auto at = [&](int64_t t) { return where_l[l][t / page] * page_elems + (j * page + t % page) * d; };
        std::vector<double> sc(pos + 1);
        double mx = -1e300, sum = 0;
        for (int64_t t = 0; t <= pos; ++t) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += double(q[(i * Hq + hq) * d + c]) * xk[l][at(t) + c];
          sc[t] = dot / std::sqrt(double(d));
          mx = std::max(mx, sc[t]);
        }
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t c = 0; c < d; ++c) {
          double acc = 0;
          for (int64_t t = 0; t <= pos; ++t) acc += sc[t] / sum * xv[l][at(t) + c];
          ref[((l * S + i) * Hq + hq) * d + c] = acc;
        }
      }
  auto err = [&](const std::vector<float>& out) {
    double m = 0, r = 0, e2 = 0, r2 = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      m = std::max(m, std::fabs(out[i] - ref[i]));
      r = std::max(r, std::fabs(ref[i]));
      e2 += (out[i] - ref[i]) * (out[i] - ref[i]);
      r2 += ref[i] * ref[i];
    }
    return std::pair<double, double>{m / r, std::sqrt(e2 / r2)};
  };
  double diff = 0;
  std::pair<double, double> err_cur{0, 0}, err_kv8{0, 0};
  if (kv8) {  // the current path's output, to compare
    step(0);
    const std::vector<float> cur = o;
    err_cur = err(cur);
    step(kv8);
    err_kv8 = err(o);
    for (size_t i = 0; i < o.size(); ++i) diff = std::max(diff, double(std::fabs(o[i] - cur[i])));
  }
  for (int i = 0; i < 20; ++i) step(kv8);
  double best = 1e9;
  for (int rep = 0; rep < 60; ++rep) {
    timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int64_t i = 0; i < iters; ++i) step(kv8);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    best = std::min(best, ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6) / double(iters));
  }
  uint64_t h = 1469598103934665603ull;
  for (float x : o) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    h = (h ^ u) * 1099511628211ull;
  }
  std::printf(
      "best %.4f ms per 8-layer step, max |kv8 - current| %.3g, vs ref: current %.3g %.3g kv8 %.3g %.3g,"
      " hash %016llx\n",
      best, diff, err_cur.first, err_cur.second, err_kv8.first, err_kv8.second, static_cast<unsigned long long>(h));
}
