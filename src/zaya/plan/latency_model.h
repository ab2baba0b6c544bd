#pragma once
// Inference latency on one device (docs/plan.md):
//
// prefill   the forward GEMMs of batch x context tokens (GemmModel) plus the
//           forward's bandwidth-bound ops
// decode    one token for each of `batch` sequences at `context`: every byte
//           that must be read, over the stream bandwidth, or the FLOPs over
//           the peak, whichever is larger, plus one launch per op:
//             dense weights (attention, routers, norms, LM head)
//             + the experts the batch touches: per MoE layer
//               E (1 - (1 - k (1 - skip) / E)^batch) distinct experts
//             + the KV cache: CCA keeps k and v at kv_width per token and
//               layer (plus a 2-token conv state), against 2 x hidden for
//               uncompressed multi-head attention; a sliding block of
//               window W (spec §12) holds only a ring of min(context, W - 1)
//               tokens and a step attends to min(context + 1, W) keys there
//               (plan/attention_window.h)

#include <cstdint>
#include <string>

#include "zaya/model/config.h"
#include "zaya/plan/gemm_model.h"

namespace zaya {

struct InferenceLayout {
  int64_t batch = 1, context = 4096;
  std::string dtype = "bf16";  // weights, KV cache and GEMMs
  double skip_fraction = 0;
};

struct LatencyPrediction {
  double prefill_seconds = 0, prefill_tokens_per_second = 0;
  double decode_seconds = 0;  // per generated token (all sequences of the batch step together)
  double decode_tokens_per_second = 0;
  double weight_bytes = 0;           // read per decode step
  double experts_touched = 0;        // per MoE layer
  double kv_bytes = 0;               // KV cache of the whole batch at `context` (rings on sliding blocks)
  double kv_bytes_uncompressed = 0;  // the same with MHA (2 x hidden per token and layer)
  bool decode_memory_bound = true;
};

LatencyPrediction predict_latency(const ZayaConfig& c, const InferenceLayout& layout, const GemmModel& gemm);

}  // namespace zaya
