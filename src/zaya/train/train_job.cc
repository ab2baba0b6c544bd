#include "zaya/train/train_job.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/core/profiler.h"
#include "zaya/core/timer.h"
#include "zaya/dist/collective.h"
#include "zaya/dist/comm.h"
#include "zaya/formats/lora_peft.h"
#include "zaya/ops/gemm_peak.h"
#include "zaya/train/final_weights.h"
#include "zaya/train/job_start.h"

namespace zaya {
namespace {

std::shared_ptr<ProcessMesh> own_mesh(std::shared_ptr<ProcessMesh> mesh) {
  return mesh ? std::move(mesh) : std::make_shared<ProcessMesh>(make_self_comm(), 1);
}

int threads_for(const TrainConfig& config) {
  if (config.run.threads > 0) omp_set_num_threads(config.run.threads);
  return omp_get_max_threads();
}

}  // namespace

TrainJob::TrainJob(const TrainConfig& config, const TrainJobOptions& options, std::shared_ptr<ProcessMesh> mesh)
    : config_(config),
      options_(options),
      mesh_(own_mesh(std::move(mesh))),
      faults_(mesh_->rank()),
      guard_(config.ft),
      log_(config_, mesh_->rank() == 0, options.write_outputs, options.quiet),
      checkpoints_(config_, *mesh_, log_),
      stop_(config.run.out_dir, *mesh_),
      stragglers_(config.ft.straggler_ratio, *mesh_) {
  threads_for(config_);
  ZAYA_CHECK(mesh_->ep_size() == config_.parallel.ep, "{}: parallel.ep = {} but the process mesh has ep = {}",
             config_.source, config_.parallel.ep, mesh_->ep_size());
  ZAYA_CHECK(mesh_->cp_size() == config_.parallel.cp || !config_.phases.empty(),
             "{}: parallel.cp = {} but the process mesh has cp = {}", config_.source, config_.parallel.cp,
             mesh_->cp_size());
  faults_.at_startup();
  // Recipes (recipe.h): every phase laid out for this layout's data replicas;
  // the run starts in the first, with its own cp (ep = 1).
  phases_ = std::make_unique<PhaseController>(config_, mesh_->world_size(), options_.synthetic_data);
  if (phases_->has_phases()) mesh_->set_cp(phases_->plan().cp);
  config_.model.validate(config_.source);
  if (mesh_->world_size() > 1)
    for (Comm* c : {&mesh_->world(), &mesh_->ep(), &mesh_->dp(), &mesh_->cp()})
      c->set_timeout(config_.parallel.comm_timeout);
  numerics_ = std::make_unique<StepNumerics>(config_, *mesh_);
  // A LoRA run's checkpoints hold the adapters only: its frozen base is loaded on resume too.
  if (!config_.init_from.empty() && (options_.init_weights || config_.lora.enabled))
    load_init_weights(config_, numerics_->model());
  // MFU is reported against the peak of the precision in use.
  peak_gflops_ = options_.peak_gflops > 0  ? options_.peak_gflops
                 : numerics_->bf16_gemms() ? measure_bf16_gemm_gflops()
                                           : measure_f32_gemm_gflops();
  if (!options_.heartbeat_dir.empty()) {
    heartbeat_ = Heartbeat(options_.heartbeat_dir, mesh_->rank());
    heartbeat_.beat(HeartbeatPhase::kSetup, step_);
  }
}

double TrainJob::validation_loss() {
  ZAYA_CHECK(phases_->val_data() != nullptr, "no validation data (synthetic run)");
  return numerics_->validation_loss(*phases_->val_data(), config_.run.eval_batches);
}

StepResult TrainJob::train_step() {
  const double t0 = now_seconds();
  const int64_t next = step_ + 1;
  StepResult r;
  faults_.before_compute(next);
  numerics_->compute_gradients(phases_->train_data(), r);
  // Own work only: the wait for other ranks' gradients and expert rows is theirs.
  r.compute_seconds = now_seconds() - t0 - numerics_->communication_wait_seconds();
  faults_.after_gradients(next, *numerics_, r);
  const double lr_scale = phases_->lr_multiplier(step_);
  r.lr = config_.optim.lr * lr_scale;
  {
    ZAYA_PROFILE_SCOPE("optim.step");
    numerics_->reduce_totals(r);
    // The values are global, so every rank takes the same decision.
    r.skipped = guard_.judge(next, r.loss, r.grad_norm);
    numerics_->update(r, lr_scale, r.skipped == nullptr);
  }
  step_ = next;
  r.step = step_;
  if (guard_.record(r.skipped, r.loss, r.grad_norm)) rollback_pending_ = true;
  if (r.skipped != nullptr)
    log_.incident("skipped-step",
                  fmt::format("step {}: {} (loss {:.6g}, gradient norm {:.6g}); the update was not applied", r.step,
                              r.skipped, r.loss, r.grad_norm),
                  step_);
  r.seconds = now_seconds() - t0;
  return r;
}

void TrainJob::enter_phase(size_t phase) {
  if (phase == phases_->phase()) return;
  const bool new_cp = phases_->plans()[phase].cp != mesh_->cp_size();
  phases_->enter(phase, config_);
  if (new_cp) {
    // Another context-parallel layout: new cp groups (ep = 1, checked by the
    // config); a pending checkpoint is published first, and the next one is
    // written with the new layout. The workspace holds the old cp communicator.
    const bool was_open = checkpoints_.close(step_);
    numerics_->drop_workspace();
    mesh_->set_cp(phases_->plan().cp);
    if (was_open) checkpoints_.open();
  }
  // A new workspace for the phase's batch shape and RoPE base.
  numerics_->rebuild_workspace();
}

TrainSummary TrainJob::run() {
  try {
    return run_steps();
  } catch (const Preempted&) {
    log_.write_plot(phases_->unigram_entropy());
    throw;
  } catch (...) {
    // A failed run still leaves its plot, and says what is lost.
    log_.write_plot(phases_->unigram_entropy());
    const int64_t safe = checkpoints_.safe_step();
    if (is_root() && checkpoints_.open_now() && safe < step_)
      fmt::print(stderr, "note: {}\n",
                 safe >= 0 ? fmt::format("the newest checkpoint of this run is step {}: steps {}..{} are not saved",
                                         safe, safe + 1, step_)
                           : fmt::format("this run has no checkpoint: steps 1..{} are not saved", step_));
    throw;
  }
}

TrainSummary TrainJob::run_steps() {
  const RunConfig& run = config_.run;
  TrainSummary summary;
  const int64_t last_step = options_.stop_at > 0 ? std::min(options_.stop_at, run.steps) : run.steps;
  summary.first_step = step_;
  if (resumed_ && step_ >= last_step) {  // resumed a finished run (or past --stop-at): rewrite nothing
    summary.steps = step_;
    summary.already_complete = true;
    return summary;
  }
  // A LoRA run trains only its adapters: the header says how many, as PEFT's print_trainable_parameters does.
  const int64_t trainable =
      config_.lora.enabled ? lora_adapter_table(numerics_->model().config(), config_.lora).total_floats() : int64_t(0);
  log_.banner(count_parameters(numerics_->model().config()), omp_get_max_threads(), peak_gflops_,
              numerics_->bf16_gemms(), phases_->unigram_entropy(), *mesh_, trainable);
  checkpoints_.check_directory(resumed_);
  const bool checkpoints = config_.checkpoint.every > 0 || config_.checkpoint.final;
  if (checkpoints && options_.write_outputs) checkpoints_.open();
  log_.open(resumed_, step_);
  summary.unigram_entropy = phases_->unigram_entropy();
  summary.peak_gflops = peak_gflops_;
  double val = NAN;
  const double t_start = now_seconds();
  double train_seconds = 0, train_flops = 0;
  int64_t train_tokens = 0;
  const int64_t first = step_;
  stop_.install();
  auto announce_phase = [&] {
    if (phases_->has_phases()) log_.phase(phases_->phase(), phases_->plan());
  };
  if (step_ == phases_->plan().first_step) announce_phase();
  // The model before any update, as the baseline the later validation losses
  // compare with (for LoRA, the base model: B starts at zero). Validation reads
  // only the validation shards and sets no generator or sampler state of
  // training, so the steps after it are the same bit for bit.
  if (!resumed_ && step_ == 0 && phases_->val_data() != nullptr && run.eval_every > 0) {
    heartbeat_.beat(HeartbeatPhase::kEval, 0);
    const double val0 = validation_loss();
    log_.validation(0, val0);
    log_.initial_validation(val0);
  }
  std::vector<double> losses;  // of steps first + 1 .. step_ (a rollback's re-run steps overwrite theirs)
  while (step_ < last_step) {
    if (const std::optional<size_t> next_phase = phases_->boundary_at(step_)) {
      enter_phase(*next_phase);
      // A new sequence length, RoPE base or mixture moves the loss and the
      // gradient norm by design: the spike detector starts over.
      guard_.start_over();
      phases_->apply_data_after_rollback();
      announce_phase();
    }
    heartbeat_.beat(HeartbeatPhase::kStep, step_ + 1);
    checkpoints_.poll(step_);
    faults_.at_step_start(step_ + 1);
    if (stop_.requested()) save_at_stop_request();
    StepResult r = train_step();
    stragglers_.add(r.compute_seconds);
    if (rollback_pending_) {
      rollback();
      continue;
    }
    if (checkpoints_.open_now() && config_.checkpoint.every > 0 && r.step % config_.checkpoint.every == 0) {
      heartbeat_.beat(HeartbeatPhase::kCheckpoint, r.step);
      checkpoints_.guarded(step_, [&] { save_checkpoint(config_.checkpoint.async); });
    }
    if (r.step > first) {  // a rollback can return before this process's first step
      losses.resize(size_t(r.step - first));
      losses.back() = r.loss;
    }
    train_seconds += r.seconds;
    train_flops += r.flops;
    train_tokens += r.tokens;
    const bool last = r.step == last_step;
    const bool eval = phases_->val_data() != nullptr && ((run.eval_every > 0 && r.step % run.eval_every == 0) || last ||
                                                         r.step == phases_->plan().end_step());
    if (eval) {
      heartbeat_.beat(HeartbeatPhase::kEval, r.step);
      val = validation_loss();
      log_.validation(r.step, val);
      log_.write_plot(phases_->unigram_entropy());
    }
    if (r.step % run.log_every == 0 || last || eval) {
      stragglers_.report(r.step, log_);
      const double elapsed = now_seconds() - t_start;
      const double per_step = train_seconds / double(std::max<int64_t>(1, r.step - first));
      const double eta = per_step * double(run.steps - r.step);
      log_.step(r, numerics_->routing(), elapsed, eta, peak_gflops_);
      // The validation loss is shown on the step it was measured, not repeated after it.
      log_.progress(r, eval ? val : NAN, double(train_tokens) / train_seconds,
                    train_flops / train_seconds / (peak_gflops_ * 1e9), elapsed, eta);
    }
  }
  heartbeat_.beat(HeartbeatPhase::kFinishing, step_);
  summary.steps = step_;
  losses.resize(size_t(std::max<int64_t>(0, step_ - first)));
  summary.train_loss = loss_ends(losses, first + 1);
  summary.final_val_loss = val;
  summary.seconds = now_seconds() - t_start;
  summary.tokens_per_second = double(train_tokens) / train_seconds;
  summary.mfu = train_flops / train_seconds / (peak_gflops_ * 1e9);  // this rank's FLOPs against one rank's peak
  if (checkpoints_.open_now())
    checkpoints_.guarded(step_, [&] {
      checkpoints_.finish();
      if (config_.checkpoint.final && checkpoints_.last_saved_step() != step_) save_checkpoint(false);
    });
  if (numerics_->lora() != nullptr) {
    // A LoRA run's output is its adapter (PEFT layout); the frozen base is where it came from.
    summary.weights_dir = (std::filesystem::path(run.out_dir) / "adapter").string();
    if (options_.write_outputs && is_root()) {
      const std::string base = !config_.init_from.empty()
                                   ? config_.init_from
                                   : fmt::format("{} (random init, seed {})", config_.model_preset, config_.run.seed);
      write_peft_adapter(summary.weights_dir, *numerics_->lora(), base);
      log_.write_plot(phases_->unigram_entropy());
      if (!options_.quiet)
        fmt::print("saved the LoRA adapter to {} (adapter_config.json, adapter_model.safetensors)\n",
                   summary.weights_dir);
    }
  } else {
    summary.weights_dir = (std::filesystem::path(run.out_dir) / "final").string();
    if (options_.write_outputs) {
      numerics_->gather_master_weights();  // a bf16 ZeRO-1 gather leaves them sharded
      // The model's config with the RoPE base it was trained with last (recipes change it from phase to phase).
      save_final_weights(numerics_->model(), config_.model, *mesh_, summary.weights_dir,
                         enum_name<ValueDtype>(kValueDtypeNames, run.save_dtype), run.save_layout);
      if (is_root()) {
        if (!config_.data.tokenizer.empty())
          std::filesystem::copy_file(config_.data.tokenizer,
                                     (std::filesystem::path(summary.weights_dir) / "tokenizer.model").string(),
                                     std::filesystem::copy_options::overwrite_existing);
        log_.write_plot(phases_->unigram_entropy());
        log_.print_saved(summary.weights_dir);
      }
    }
  }
  summary.checkpoint_step = checkpoints_.open_now() ? checkpoints_.safe_step() : -1;
  summary.dropped_records = log_.dropped_records();
  return summary;
}

void TrainJob::save_checkpoint(bool async) {
  checkpoints_.save(step_, state_snapshot(state_parts(), is_root()), state_header(state_parts(), step_), async);
}

void TrainJob::resume_from(const CheckpointReader& ck) {
  const StateOnDisk s = read_state(state_parts(), ck, is_root() && !options_.quiet && config_.phases.empty());
  if (phases_->has_phases()) enter_phase(s.phase);
  if (s.with_optimizer) restore_state(state_parts(), ck.meta().state);
  checkpoints_.adopt(ck.meta().run_id, s.step);
  step_ = s.step;
  resumed_ = true;
}

void TrainJob::save_at_stop_request() {
  log_.incident(
      "preempted",
      fmt::format("stop requested at step {}: saving a checkpoint and exiting with code {}", step_, kExitPreempted),
      step_);
  heartbeat_.beat(HeartbeatPhase::kCheckpoint, step_);
  if (checkpoints_.open_now()) {
    checkpoints_.finish();
    if (checkpoints_.last_saved_step() != step_) save_checkpoint(false);
  }
  throw Preempted();
}

void TrainJob::rollback() {
  rollback_pending_ = false;
  guard_.rolled_back();
  if (checkpoints_.open_now()) checkpoints_.guarded(step_, [&] { checkpoints_.finish(); });
  // The newest checkpoint (rank 0 chooses, everyone loads the same one).
  const std::string path = checkpoints_.newest();
  if (const std::optional<std::string> why = guard_.rollback_refused(path, step_))
    throw CollectiveError(*why, false, is_root());  // every rank refuses alike
  const int64_t bad = step_;
  const SamplerState data = phases_->train_data().state();
  const size_t bad_phase = phases_->phase();
  run_collectively(mesh_->world(), "rolling back to " + path, [&] { resume_from(CheckpointReader::open(path)); });
  // Continue with the data after the offending window: the batches of steps
  // (checkpoint, bad] are not seen again.
  phases_->skip_after_rollback(bad_phase, data);
  log_.incident("rollback",
                fmt::format("{} consecutive skipped steps up to step {}: rolled back to {} (step {}) and "
                            "skipped the data of steps {}..{}",
                            config_.ft.rollback_after, bad, path, step_, step_ + 1, bad),
                step_);
  log_.reopen_at(step_);  // keeps the records up to the checkpoint's step
}

}  // namespace zaya
