#include "zaya/plan/plan_job.h"

#include <algorithm>

namespace zaya {

PlanJobResult run_plan_job(const PlanJobOptions& o) {
  PlanJobResult r;
  r.setup = setup_plan(o.common);
  const ZayaConfig& c = r.setup.config;
  const TrainLayout& L = r.setup.layout;
  const GemmModel& gemm = *r.setup.gemm;
  r.counts = count_parameters(c);
  r.step = predict_step(c, L, gemm);
  r.gemms_by_time = r.step.gemms;
  std::sort(r.gemms_by_time.begin(), r.gemms_by_time.end(),
            [](const GemmTime& a, const GemmTime& b) { return a.seconds > b.seconds; });
  r.memory = predict_memory(c, L);
  r.inference.batch = o.batch;
  r.inference.context = o.context;
  r.inference.dtype = o.infer_dtype.empty() ? L.dtype : o.infer_dtype;
  r.inference.skip_fraction = L.skip_fraction;
  r.latency = predict_latency(c, r.inference, gemm);
  if (o.tradeoff) r.tradeoff = moe_tradeoff(c, L, r.inference, gemm);
  return r;
}

nlohmann::json plan_json(const PlanJobResult& res, const std::string& model) {
  const TrainLayout& L = res.setup.layout;
  const StepPrediction& r = res.step;
  const MemoryPrediction& m = res.memory;
  const InferenceLayout& il = res.inference;
  const LatencyPrediction& lat = res.latency;
  nlohmann::json tj = nlohmann::json::array();
  for (const MoeTradeoffRow& t : res.tradeoff)
    tj.push_back({{"experts", t.config.experts},
                  {"expert_ffn", t.config.expert_ffn},
                  {"top_k", t.config.top_k},
                  {"active_params", t.active_params},
                  {"total_params", t.total_params},
                  {"train_tokens_per_second", t.train_tokens_per_second},
                  {"train_mfu", t.train_mfu},
                  {"decode_seconds", t.decode_seconds},
                  {"experts_touched", t.experts_touched}});
  return {{"plan", "zaya"},
          {"format_version", 1},
          {"model", model},
          {"profile", res.setup.profile.name},
          {"layout",
           {{"world", L.world},
            {"dp", L.dp()},
            {"ep", L.ep},
            {"cp", L.cp},
            {"micro_batch", L.micro_batch},
            {"seq_len", L.seq_len},
            {"grad_accum", L.grad_accum},
            {"dtype", L.dtype},
            {"recompute", recompute_name(L.recompute)},
            {"muon", L.muon}}},
          {"step",
           {{"gemm_fwd_seconds", r.gemm_fwd},
            {"gemm_bwd_seconds", r.gemm_bwd},
            {"stream_seconds", r.stream},
            {"recompute_seconds", r.recompute_gemm + r.recompute_stream},
            {"recompute_flops", r.recompute_flops},
            {"compute_seconds", r.compute},
            {"optimizer_seconds", r.optimizer_gemm + r.optimizer_stream},
            {"grad_reduce_seconds", r.grad_reduce},
            {"grad_reduce_exposed_seconds", r.grad_reduce_exposed},
            {"param_gather_seconds", r.param_gather},
            {"expert_all_to_all_seconds", r.expert_all_to_all},
            {"context_parallel_seconds", r.context_parallel},
            {"step_seconds", r.step},
            {"tokens_per_second", r.tokens_per_second},
            {"mfu", r.mfu}}},
          {"memory_bytes",
           {{"weights", m.weights},
            {"gradients", m.gradients},
            {"optimizer", m.optimizer},
            {"activations", m.activations},
            {"logits", m.logits},
            {"total", m.total()}}},
          {"inference",
           {{"batch", il.batch},
            {"context", il.context},
            {"prefill_seconds", lat.prefill_seconds},
            {"decode_seconds", lat.decode_seconds},
            {"kv_bytes", lat.kv_bytes},
            {"kv_bytes_uncompressed", lat.kv_bytes_uncompressed}}},
          {"moe_tradeoff", tj}};
}

}  // namespace zaya
