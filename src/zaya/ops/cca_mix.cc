#include "zaya/ops/cca_mix.h"

#include "zaya/ops/parallel_for.h"

namespace zaya {

template <typename T>
void cca_mean_terms_forward(T* q_TQ, T* k_TK, const T* c_TC, const T* qkv, const CcaMixShape& s) {
  const int64_t Tn = s.batch * s.seq, Hq = s.q_heads, Hk = s.kv_heads, d = s.head_dim, G = Hq / Hk;
  const int64_t QW = s.q_width(), KW = s.kv_width(), C = QW + KW;
  parallel_for(Tn, 2 * Tn * C, [&](int64_t t) {
    const T* q = qkv + t * s.in_stride;
    const T* k = q + QW;
    const T* c = c_TC + t * C;
    T* qo = q_TQ + t * QW;
    T* ko = k_TK + t * KW;
    for (int64_t j = 0; j < Hk; ++j) {
      for (int64_t i = 0; i < d; ++i) {
        T qsum = 0;
        for (int64_t g = 0; g < G; ++g) {
          const int64_t h = j * G + g;
          qo[h * d + i] = c[h * d + i] + (q[h * d + i] + k[j * d + i]) * T(0.5);
          qsum += q[h * d + i];
        }
        ko[j * d + i] = c[QW + j * d + i] + (qsum / T(G) + k[j * d + i]) * T(0.5);
      }
    }
  });
}

template <typename T>
void cca_mean_terms_backward(T* dc_TC, T* dqkv, const T* dq_TQ, const T* dk_TK, const CcaMixShape& s) {
  const int64_t Tn = s.batch * s.seq, Hq = s.q_heads, Hk = s.kv_heads, d = s.head_dim, G = Hq / Hk;
  const int64_t QW = s.q_width(), KW = s.kv_width(), C = QW + KW;
  parallel_for(Tn, 2 * Tn * C, [&](int64_t t) {
    const T* dq = dq_TQ + t * QW;
    const T* dk = dk_TK + t * KW;
    T* dc = dc_TC + t * C;
    T* dqr = dqkv + t * s.in_stride;
    T* dkr = dqr + QW;
    for (int64_t j = 0; j < Hk; ++j) {
      for (int64_t i = 0; i < d; ++i) {
        const T dmk = dk[j * d + i];
        dc[QW + j * d + i] = dmk;
        T dk_raw = dmk * T(0.5);
        for (int64_t g = 0; g < G; ++g) {
          const int64_t h = j * G + g;
          const T dmq = dq[h * d + i];
          dc[h * d + i] = dmq;
          dqr[h * d + i] += dmq * T(0.5) + dmk * T(0.5) / T(G);
          dk_raw += dmq * T(0.5);
        }
        dkr[j * d + i] += dk_raw;
      }
    }
  });
}

template <typename T>
void cca_values_forward(T* v_TK, const T* qkv, const CcaMixShape& s, const T* hist) {
  const int64_t KW = s.kv_width(), half = KW / 2, off = s.q_width() + KW;
  parallel_for_2d(s.batch, s.seq, s.batch * s.seq * KW, [&](int64_t b, int64_t t) {
    const int64_t row = b * s.seq + t;
    const T* prev = s.doc_start(row)  ? nullptr
                    : t > 0           ? qkv + (row - 1) * s.in_stride + off + half
                    : hist != nullptr ? hist + ((b + 1) * s.hist_rows - 1) * s.in_stride + off + half
                                      : nullptr;
    cca_value_row(v_TK + row * KW, qkv + row * s.in_stride + off, prev, half);
  });
}

template <typename T>
void cca_values_backward(T* dqkv, const T* dv_TK, const CcaMixShape& s, T* dhist) {
  const int64_t KW = s.kv_width(), half = KW / 2, off = s.q_width() + KW;
  parallel_for_2d(s.batch, s.seq, s.batch * s.seq * KW, [&](int64_t b, int64_t t) {
    const int64_t row = b * s.seq + t;
    const T* dv = dv_TK + row * KW;
    T* dcur = dqkv + row * s.in_stride + off;
    for (int64_t i = 0; i < half; ++i) dcur[i] += dv[i];
    // v_prev of row t + 1 came from this row's delayed-stream projection.
    if (t + 1 < s.seq && !s.doc_start(row + 1)) {
      const T* dv_next = dv_TK + (row + 1) * KW + half;
      for (int64_t i = 0; i < half; ++i) dcur[half + i] += dv_next[i];
    }
    if (t == 0 && dhist != nullptr && !s.doc_start(row)) {
      T* dprev = dhist + ((b + 1) * s.hist_rows - 1) * s.in_stride + off + half;
      for (int64_t i = 0; i < half; ++i) dprev[i] += dv[half + i];
    }
  });
}

template void cca_mean_terms_forward<float>(float*, float*, const float*, const float*, const CcaMixShape&);
template void cca_mean_terms_forward<double>(double*, double*, const double*, const double*, const CcaMixShape&);
template void cca_mean_terms_backward<float>(float*, float*, const float*, const float*, const CcaMixShape&);
template void cca_mean_terms_backward<double>(double*, double*, const double*, const double*, const CcaMixShape&);
template void cca_values_forward<float>(float*, const float*, const CcaMixShape&, const float*);
template void cca_values_forward<double>(double*, const double*, const CcaMixShape&, const double*);
template void cca_values_backward<float>(float*, const float*, const CcaMixShape&, float*);
template void cca_values_backward<double>(double*, const double*, const CcaMixShape&, double*);

}  // namespace zaya
