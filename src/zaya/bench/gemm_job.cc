#include "zaya/bench/gemm_job.h"

#include "zaya/bench/byte_size.h"
#include "zaya/core/error.h"

namespace zaya {

GemmRunOptions gemm_run_options(const GemmJobOptions& o) {
  GemmRunOptions r;
  r.dtypes.clear();
  for (const std::string& d : o.dtypes) r.dtypes.push_back(parse_gemm_dtype(d));
  r.timing.min_seconds = o.min_time;
  r.timing.min_calls = o.min_calls;
  r.falloff = o.falloff;
  r.peak_f32 = o.peak_f32;
  r.peak_bf16 = o.peak_bf16;
  if (o.peak_side > 0) r.peak_side_f32 = r.peak_side_bf16 = o.peak_side;
  r.membw_gbps = o.membw;
  r.max_bytes = double(parse_byte_size(o.max_memory, "--max-memory"));
  // A model's shapes are what a config chooses: whether padding them pays is the question.
  r.align = o.align >= 0 ? o.align : (o.model.empty() ? 0 : 64);
  return r;
}

std::vector<GemmShape> gemm_sweep_shapes(const GemmJobOptions& o) {
  std::vector<GemmShape> shapes;
  for (const std::string& layout : o.layouts) {
    bool ta = false, tb = false;
    parse_gemm_layout(layout, ta, tb);
    auto add = [&](GemmShape s) {
      s.trans_a = ta;
      s.trans_b = tb;
      shapes.push_back(s);
    };
    if (!o.shapes.empty()) {
      for (const std::string& s : o.shapes) add(parse_gemm_shape(s, "--shape"));
    } else {
      for (int64_t m : parse_dim_list(o.m, "-m/--m"))
        for (int64_t n : parse_dim_list(o.n, "-n/--n"))
          for (int64_t k : parse_dim_list(o.k, "-k/--k")) add({m, n, k, false, false});
    }
  }
  return shapes;
}

GemmEfficiencyTable run_gemm_job(const GemmJobOptions& o, const GemmRunOptions& r, const GemmProgress& on_entry) {
  if (o.model.empty()) return run_gemm_shapes(gemm_sweep_shapes(o), r, {}, on_entry);
  ZAYA_CHECK_USAGE(o.shapes.empty(), "--model measures the model's own shapes; drop --shape");
  ModelGemmOptions m;
  m.micro_batch = o.micro_batch;
  m.seq_len = o.seq_len;
  m.ep = o.ep;
  m.skip_fraction = o.skip_fraction;
  m.expert_tokens = o.expert_tokens;
  const ZayaConfig config = load_model_config(o.model);
  return run_gemm_model(config, o.model, m, r, {}, on_entry);
}

GemmModelTotal gemm_model_total(const GemmEfficiencyTable& t, GemmDType dtype) {
  GemmModelTotal total;
  for (const GemmModelEntry& g : t.model_gemms) {
    if (g.dtype != dtype || g.entry < 0) continue;
    total.seconds += t.entries[size_t(g.entry)].seconds * g.count;
    total.flops += g.shape.flops() * g.count;
  }
  return total;
}

int count_falloffs(const GemmEfficiencyTable& t) {
  int n = 0;
  for (const GemmTableEntry& e : t.entries) n += e.falls_off;
  return n;
}

}  // namespace zaya
