#pragma once
// Softmax cross-entropy over the (padded) vocabulary. Logit columns at or
// beyond `real_vocab` belong to padding rows of the tied embedding (spec §7):
// they are masked out of the softmax, never predicted and get zero gradient.
// A target < 0 means "no loss at this position".

#include <cstdint>

namespace zaya {

// loss_T[t] = lse_t - logits[t, target_t] (0 where target < 0); lse_T keeps the
// log-sum-exp over the real vocabulary for backward.
template <typename T>
void cross_entropy_forward(T* loss_T, T* lse_T, const T* logits_TV, const int32_t* targets_T, int64_t tokens,
                           int64_t vocab, int64_t real_vocab);

// One row of cross_entropy_forward: its loss at `target` (lse - logits[target])
// and its log-sum-exp, the same arithmetic bit for bit (the forward runs it per
// row), without the forward's parallel region. The cached decoder's
// log-probability of a sampled token is -loss (infer/generator.h: the trainer's
// log-softmax on the decoder's logits, rl/).
template <typename T>
T cross_entropy_row(const T* logits_V, int32_t target, int64_t real_vocab, T* lse = nullptr);

// dlogits_TV = grad_scale * (softmax - onehot), masked columns 0, rows without
// target 0. dlogits may alias logits (in-place). row_scale_T, when given,
// multiplies row t's scale by row_scale_T[t] (a per-token weight of the loss,
// e.g. a policy-gradient advantage: rl/); null gives the same bits as before.
template <typename T>
void cross_entropy_backward(T* dlogits_TV, const T* logits_TV, const T* lse_T, const int32_t* targets_T, int64_t tokens,
                            int64_t vocab, int64_t real_vocab, T grad_scale, const T* row_scale_T = nullptr);

// cross_entropy_backward<float> rounded to bf16 as it is written (the values
// float_to_bf16 of its result would give): the operand of the LM head's bf16
// backward GEMMs (ops/bf16_linear.h, bf16_dy_scratch), without a float32
// dlogits array written and read again.
void cross_entropy_backward_bf16(uint16_t* dlogits_TV, const float* logits_TV, const float* lse_T,
                                 const int32_t* targets_T, int64_t tokens, int64_t vocab, int64_t real_vocab,
                                 float grad_scale, const float* row_scale_T = nullptr);

// Row-wise softmax of x_TN into p_TN (may alias).
template <typename T>
void softmax_rows(T* p_TN, const T* x_TN, int64_t rows, int64_t n);

}  // namespace zaya
