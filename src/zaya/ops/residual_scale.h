#pragma once
// ZAYA1 residual scaling (spec §5, `ResidualScaling`, scale_residual_merge):
//   res_out = (h + hb) * hs + (res_in + rb) * rs
// with learned per-channel vectors. The first half-layer has no residual term
// (res_in == nullptr): res_out = (h + hb) * hs. Without scale_residual_merge
// the vectors are absent (hs == nullptr, and then every vector is null): the
// merge is the plain sum res_out = h + res_in (spec §11).

#include <cstdint>

namespace zaya {

// res_out_TD = (h_TD + hb_D) * hs_D + [(res_in_TD + rb_D) * rs_D]; res_in_TD may be null.
template <typename T>
void residual_scale_forward(T* res_out_TD, const T* h_TD, const T* hs_D, const T* hb_D, const T* res_in_TD,
                            const T* rs_D, const T* rb_D, int64_t tokens, int64_t dim);

// Writes dh_TD (and dres_in_TD when res_in_TD is given); adds into dhs_D, dhb_D
// (and drs_D, drb_D). The data gradients are each half-layer's first, so they
// are written, not accumulated: no zeroing pass before the call.
// Null parameter gradients (dhs_D and dhb_D, drs_D and drb_D: in pairs) are
// frozen vectors (model/weights.h): only dh_TD and dres_in_TD are computed.
template <typename T>
void residual_scale_backward(T* dh_TD, T* dhs_D, T* dhb_D, T* dres_in_TD, T* drs_D, T* drb_D, const T* dres_out_TD,
                             const T* h_TD, const T* hs_D, const T* hb_D, const T* res_in_TD, const T* rs_D,
                             const T* rb_D, int64_t tokens, int64_t dim);

}  // namespace zaya
