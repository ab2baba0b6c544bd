#include "zaya/plan/attention_window.h"

#include <algorithm>

#include "zaya/model/model.h"

namespace zaya {

double attended_keys(int64_t S, int64_t W) {
  const double s = double(S);
  if (W <= 0 || W >= S) return s * (s + 1) / 2;
  const double w = double(W);
  return w * (w + 1) / 2 + (s - w) * w;  // the first W queries fill the window, the rest see W each
}

double attention_forward_flops(const ZayaConfig& c, int64_t B, int64_t S) {
  double keys = 0;
  for (int64_t b = 0; b < c.num_blocks; ++b) keys += attended_keys(S, c.window_of(b));
  return double(B) * 4.0 * double(c.q_width()) * keys;
}

double windowed_forward_flops(const ZayaConfig& c, int64_t B, int64_t S, double routed_rows) {
  ZayaConfig full = c;
  full.sliding_window = 0;
  full.sliding_blocks.clear();
  return model_forward_flops(full, B, S, routed_rows) - attention_forward_flops(full, B, S) +
         attention_forward_flops(c, B, S);
}

double kv_cache_tokens(const ZayaConfig& c, int64_t context) {
  double tokens = 0;
  for (int64_t b = 0; b < c.num_blocks; ++b) {
    const int64_t W = c.window_of(b);
    tokens += double(W > 0 ? std::min(context, W - 1) : context);
  }
  return tokens;
}

double decode_attended_keys(const ZayaConfig& c, int64_t context) {
  double keys = 0;
  for (int64_t b = 0; b < c.num_blocks; ++b) {
    const int64_t W = c.window_of(b);
    keys += double(W > 0 ? std::min(context + 1, W) : context + 1);
  }
  return keys;
}

}  // namespace zaya
