#pragma once
// The run log of a training job (docs/training.md, "Outputs"): the progress
// lines on stdout, metrics.jsonl (one JSON record per logged step, validation,
// phase and straggler report), incidents.jsonl (shared with the supervisor),
// config.toml and the loss plot, all under train.out_dir. Only rank 0 prints
// and writes; on the other ranks every call is a no-op.
//
// A full disk does not stop the run here and does not corrupt a file:
// metrics.jsonl takes whole records only (io/record_file.h), a record that
// cannot be written is dropped with a warning, and a torn last line (a crash
// mid-write) is repaired when the run resumes. The checkpoint manager decides
// when failed saves stop the run.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/dist/mesh.h"
#include "zaya/io/record_file.h"
#include "zaya/model/moe_block.h"
#include "zaya/train/recipe.h"
#include "zaya/train/step_result.h"
#include "zaya/train/train_config.h"

namespace zaya {

class RunLog {
 public:
  // root: this rank writes; write_outputs: files at all (benchmarks: none);
  // quiet: no progress lines.
  RunLog(const TrainConfig& config, bool root, bool write_outputs, bool quiet);
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  bool printing() const { return printing_; }
  bool writing() const { return writing_; }

  // Opens metrics.jsonl (and writes config.toml). Resumed at `step`: keeps the
  // records up to that step (a crashed run may have logged steps past it),
  // continues the file and reloads the plot's points.
  void open(bool resumed, int64_t step);
  // After a rollback to `step`: the records past it go.
  void reopen_at(int64_t step);

  // The start of a run: model, batch, threads, peak, unigram entropy.
  // The mesh's layout and the global tokens of a step are named on a distributed run.
  // trainable > 0 (a LoRA run): the adapters' parameters, against all (base + adapters).
  void banner(const ParamCounts& counts, int threads, double peak_gflops, bool bf16, double unigram_entropy,
              const ProcessMesh& mesh, int64_t trainable = 0);
  // The validation loss of the model before its first update (printed; validation() records it).
  void initial_validation(double val_loss);
  // A recipe phase begins (its first step is plan.first_step + 1).
  void phase(size_t index, const PhasePlan& plan);
  // A logged step: the metrics record (with per-layer routing) and a plot point.
  void step(const StepResult& r, const std::vector<RoutingStats>& routing, double elapsed, double eta_seconds,
            double peak_gflops);
  void validation(int64_t step, double val_loss);
  // The progress line of a logged step (val: the last validation loss or NaN;
  // tokens/s and MFU over the run so far).
  void progress(const StepResult& r, double val, double tokens_per_second, double mfu, double elapsed, double eta);
  // Per-rank step seconds since the last report.
  void stragglers(int64_t step, const std::vector<double>& rank_seconds, int slowest);
  // A warning on stderr and a record in incidents.jsonl.
  void incident(const std::string& event, const std::string& detail, int64_t step);
  // loss.svg from the logged points (and the unigram entropy as a reference
  // line), written atomically; a failure is a warning.
  void write_plot(double unigram_entropy);
  void print_saved(const std::string& weights_dir) const;
  // A record of metrics.jsonl as it is (one JSON object with "step": `zaya rl`'s own records).
  void record(const std::string& line);
  // Metric records that could not be written (a full disk).
  int64_t dropped_records() const { return metrics_.dropped(); }

 private:
  std::string path(const char* name) const;
  // A warning on stderr, once per kind of failure (a full disk would repeat it every step).
  void warn_once(const std::string& what, const std::string& why);

  const TrainConfig& config_;
  bool root_, printing_, writing_;  // rank 0; it prints progress; it writes files
  RecordFile metrics_;
  std::vector<std::string> warned_;
  std::vector<double> plot_steps_, plot_loss_, plot_val_steps_, plot_val_loss_;
};

// "1h02m", "3m05s", "42s" ("?" for a negative or infinite duration).
std::string format_duration(double seconds);
// "1.23M", "45.6k", "789".
std::string format_rate(double tokens_per_second);

}  // namespace zaya
