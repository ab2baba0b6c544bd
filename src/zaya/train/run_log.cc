#include "zaya/train/run_log.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zaya/core/count_units.h"
#include "zaya/core/error.h"
#include "zaya/io/append_file.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/report/svg_line_plot.h"

namespace zaya {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = int64_t(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string format_rate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return fmt::format("{:.2f}M", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return fmt::format("{:.1f}k", tokens_per_s / 1e3);
  return fmt::format("{:.0f}", tokens_per_s);
}

RunLog::RunLog(const TrainConfig& config, bool root, bool write_outputs, bool quiet)
    : config_(config), root_(root), printing_(root && !quiet), writing_(root && write_outputs) {}

std::string RunLog::path(const char* name) const {
  return (std::filesystem::path(config_.run.out_dir) / name).string();
}

void RunLog::open(bool resumed, int64_t step) {
  if (!writing_) return;
  std::error_code ec;
  std::filesystem::create_directories(config_.run.out_dir, ec);
  ZAYA_CHECK(!ec, "cannot create train.out_dir '{}': {}", config_.run.out_dir, ec.message());
  const std::string metrics_path = path("metrics.jsonl");
  if (resumed) {
    // Keep the whole records up to the checkpoint (a crashed run may have
    // logged steps past it, or left a torn last line), then continue the
    // file; reload the plot's points.
    int64_t torn = 0;
    std::ifstream in(metrics_path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string whole = whole_json_lines(text, &torn);
    std::string kept;
    size_t begin = 0;
    while (begin < whole.size()) {
      const size_t end = whole.find('\n', begin);
      const std::string line = whole.substr(begin, end - begin);
      begin = end + 1;
      const nlohmann::json j = parse_json(line, metrics_path);
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
      const int64_t s = j["step"].get<int64_t>();
      if (s > step) continue;
      kept += line + "\n";
      if (j.contains("loss")) {
        plot_steps_.push_back(double(s));
        plot_loss_.push_back(j["loss"].get<double>());
      } else if (j.contains("val_loss")) {
        plot_val_steps_.push_back(double(s));
        plot_val_loss_.push_back(j["val_loss"].get<double>());
      }
    }
    if (torn > 0 && printing_)
      fmt::print(stderr, "note: {}: dropped {} torn line(s) left by the interrupted run\n", metrics_path, torn);
    write_file_atomic(metrics_path, kept);
  }
  metrics_ = RecordFile(metrics_path, !resumed);
  write_file_atomic(path("config.toml"), train_config_to_toml(config_));
}

void RunLog::reopen_at(int64_t step) {
  if (!metrics_.is_open()) return;
  metrics_ = RecordFile();
  plot_steps_.clear();
  plot_loss_.clear();
  plot_val_steps_.clear();
  plot_val_loss_.clear();
  open(true, step);
}

void RunLog::warn_once(const std::string& what, const std::string& why) {
  if (!root_) return;
  for (const std::string& w : warned_)
    if (w == what) return;
  warned_.push_back(what);
  fmt::print(stderr, "warning: {}: {}; training continues\n", what, why);
}

void RunLog::record(const std::string& line) {
  if (!metrics_.is_open()) return;
  if (!metrics_.append(line))
    warn_once(metrics_.path(), fmt::format("a record could not be written ({}); the file keeps whole records only",
                                           metrics_.last_error()));
}

void RunLog::banner(const ParamCounts& counts, int threads, double peak_gflops, bool bf16, double unigram_entropy,
                    const ProcessMesh& mesh, int64_t trainable) {
  const char* precision = bf16 ? "bf16" : "f32";
  if (!printing_) return;
  const RunConfig& run = config_.run;
  const ZayaConfig& c = config_.model;
  fmt::print("zaya train: {} preset, {:.2f}M parameters ({:.2f}M active), vocab {} ({} padded)\n", config_.model_preset,
             counts.total / 1e6, counts.active / 1e6, c.real_vocab_size, c.vocab_size);
  if (mesh.world_size() == 1)
    fmt::print("  {} steps x {} tokens ({} x {} x {} accum), {} threads, {} GEMMs, peak {:.0f} GFLOP/s\n", run.steps,
               run.tokens_per_step(), run.micro_batch, run.seq_len, run.grad_accum, threads, precision, peak_gflops);
  else
    fmt::print(
        "  {} steps x {} tokens ({} ranks: dp {} x ep {} x cp {}; per rank {} x {} x {} accum), {} threads per "
        "rank, {} GEMMs, peak {:.0f} GFLOP/s\n",
        run.steps, run.tokens_per_step() * mesh.data_ranks(), mesh.world_size(), mesh.dp_size(), mesh.ep_size(),
        mesh.cp_size(), run.micro_batch, run.seq_len / mesh.cp_size(), run.grad_accum, threads, precision, peak_gflops);
  if (trainable > 0) {
    const LoraConfig& l = config_.lora;
    const double all = double(counts.total + trainable);
    fmt::print("  LoRA rank {} (alpha {:g}) on {} target(s): trainable {:L} of {} ({:.1f}%); the base is frozen{}\n",
               l.rank, l.alpha, l.targets.size(), trainable, format_count(all), 100.0 * double(trainable) / all,
               l.quantized_base()
                   ? fmt::format(", its routed experts held as {}",
                                 enum_name(std::span<const EnumName<LoraBaseDtype>>(kLoraBaseDtypeNames), l.base_dtype))
                   : "");
  }
  if (unigram_entropy > 0) fmt::print("  unigram entropy of the training data: {:.3f} nats/token\n", unigram_entropy);
  std::fflush(stdout);
}

void RunLog::initial_validation(double val_loss) {
  if (!printing_) return;
  fmt::print("step {:>6}/{} | val {:.4f} (before the first update)\n", 0, config_.run.steps, val_loss);
  std::fflush(stdout);
}

void RunLog::phase(size_t index, const PhasePlan& p) {
  if (printing_) {
    fmt::print("{}\n", describe_phase(config_, index, p));
    std::fflush(stdout);
  }
  // "step" is the phase's first step (records up to a checkpoint's step are kept on resume).
  record(
      fmt::format("{{\"step\":{},\"phase\":{},\"name\":{},\"steps\":{},\"micro_batch\":{},\"seq_len\":{},"
                  "\"rope_theta\":{},\"peak_lr\":{:.6e}}}",
                  p.first_step + 1, index + 1, nlohmann::json(p.name).dump(), p.steps, p.micro_batch, p.seq_len,
                  p.rope_theta, config_.optim.lr * p.lr_ratio));
}

void RunLog::step(const StepResult& r, const std::vector<RoutingStats>& routing_stats, double elapsed,
                  double eta_seconds, double peak_gflops) {
  plot_steps_.push_back(double(r.step));
  plot_loss_.push_back(r.loss);
  if (!metrics_.is_open()) return;
  const ZayaConfig& c = config_.model;
  std::string routing;
  for (int64_t l = 0; l < c.num_blocks; ++l) {
    const RoutingStats& s = routing_stats[size_t(l)];
    double total = 0;
    for (double v : s.choices_N) total += v;
    std::string load;
    for (int64_t e = 0; e < c.experts; ++e)
      load += fmt::format("{}{:.4f}", e ? "," : "", s.choices_N[size_t(e)] / total);
    const double skip = c.use_skip ? s.choices_N[size_t(c.experts)] / total : 0.0;
    routing += fmt::format("{}{{\"layer\":{},\"load\":[{}],\"skip\":{:.4f},\"entropy\":{:.4f}}}", l ? "," : "",
                           2 * l + 1, load, skip, s.entropy_sum / s.tokens);
  }
  record(fmt::format(
      "{{\"step\":{},\"loss\":{:.6f},\"router_loss\":{:.6f},\"lr\":{:.6e},\"grad_norm\":{:.5f},"
      "\"tokens\":{},\"step_seconds\":{:.4f},\"tokens_per_second\":{:.1f},\"mfu\":{:.4f},\"elapsed\":{:.2f},"
      "\"eta\":{:.1f},{}{}{}\"routing\":[{}]}}",
      r.step, r.loss, r.router_loss, r.lr, r.grad_norm, r.tokens, r.seconds, double(r.tokens) / r.seconds,
      r.flops / r.seconds / (peak_gflops * 1e9), elapsed, eta_seconds,
      r.skipped ? fmt::format("\"skipped\":\"{}\",", r.skipped) : "",
      // A loss mask (fine-tuning data): the targets the loss is a mean over.
      r.loss_tokens != r.tokens ? fmt::format("\"loss_tokens\":{},", r.loss_tokens) : "",
      // ZeRO-1 (distributed runs): the bytes this rank received in the parameter all-gather.
      r.param_gather_bytes > 0 ? fmt::format("\"param_gather_bytes\":{},", r.param_gather_bytes) : "", routing));
}

void RunLog::validation(int64_t step, double val) {
  plot_val_steps_.push_back(double(step));
  plot_val_loss_.push_back(val);
  record(fmt::format("{{\"step\":{},\"val_loss\":{:.6f}}}", step, val));
}

void RunLog::progress(const StepResult& r, double val, double tokens_per_second, double mfu, double elapsed,
                      double eta) {
  if (!printing_) return;
  fmt::print(
      "step {:>6}/{} | loss {:.4f} | val {} | lr {:.2e} | gnorm {:.3f} | {} tok/s | MFU {:.1f}% | {} | "
      "ETA {}{}\n",
      r.step, config_.run.steps, r.loss, std::isnan(val) ? std::string("  -   ") : fmt::format("{:.4f}", val), r.lr,
      r.grad_norm, format_rate(tokens_per_second), 100.0 * mfu, format_duration(elapsed), format_duration(eta),
      r.skipped ? fmt::format(" | SKIPPED ({})", r.skipped) : "");
  std::fflush(stdout);
}

void RunLog::stragglers(int64_t step, const std::vector<double>& rank_seconds, int slowest) {
  record(fmt::format("{{\"step\":{},\"rank_step_seconds\":[{:.4f}],\"slowest_rank\":{}}}", step,
                     fmt::join(rank_seconds, ","), slowest));
}

void RunLog::incident(const std::string& event, const std::string& detail, int64_t step) {
  if (!root_) return;
  fmt::print(stderr, "warning: {}: {}\n", event, detail);
  if (!writing_) return;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const nlohmann::json j = {{"time", now}, {"source", "trainer"}, {"event", event}, {"step", step}, {"detail", detail}};
  try {
    append_line(path("incidents.jsonl"), j.dump());
  } catch (const Error& e) {
    warn_once(path("incidents.jsonl"), fmt::format("an incident could not be recorded ({})", e.what()));
  }
}

void RunLog::write_plot(double unigram_entropy) {
  if (!writing_ || plot_steps_.empty()) return;
  LinePlotOptions o;
  o.title = fmt::format("zaya train: {} ({} preset, step {})", config_.run.out_dir, config_.model_preset,
                        int64_t(plot_steps_.back()));
  o.x_label = "optimizer step";
  o.y_label = "cross-entropy (nats/token)";
  SvgLinePlot plot(o);
  plot.add_series("train loss", plot_steps_, plot_loss_);
  if (!plot_val_steps_.empty()) plot.add_series("validation loss", plot_val_steps_, plot_val_loss_);
  if (unigram_entropy > 0) plot.add_reference_line(unigram_entropy, "unigram entropy of the corpus");
  try {
    plot.save(path("loss.svg"));
  } catch (const Error& e) {
    warn_once(path("loss.svg"), fmt::format("the plot could not be written ({})", e.what()));
  }
}

void RunLog::print_saved(const std::string& weights_dir) const {
  if (!printing_ || !writing_) return;
  fmt::print("saved weights to {} (config.json, model.safetensors{}); metrics in {}; plot {}\n", weights_dir,
             config_.data.tokenizer.empty() ? "" : ", tokenizer.model", path("metrics.jsonl"), path("loss.svg"));
}

}  // namespace zaya
