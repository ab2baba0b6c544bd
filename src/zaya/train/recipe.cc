#include "zaya/train/recipe.h"

#include <fmt/format.h>

#include <algorithm>

#include "zaya/core/error.h"
#include "zaya/train/train_config.h"
#include "zaya/train/train_fields.h"

namespace zaya {

size_t PhaseConfig::main_dataset() const {
  size_t best = 0;
  for (size_t k = 1; k < data.size(); ++k)
    if (data[k].weight > data[best].weight) best = k;
  return best;
}

int64_t phase_tokens_per_step(const PhaseConfig& phase, int64_t grad_accum, int64_t data_replicas) {
  return phase.micro_batch * phase.seq_len * grad_accum * data_replicas;
}

std::vector<PhasePlan> plan_phases(const TrainConfig& config, int64_t world_size) {
  ZAYA_ASSERT(world_size >= 1);
  std::vector<PhasePlan> plans;
  if (config.phases.empty()) {
    // The implicit phase: [train] and [schedule] as they are.
    PhasePlan p;
    p.name = "train";
    p.steps = config.run.steps;
    p.micro_batch = config.run.micro_batch;
    p.seq_len = config.run.seq_len;
    p.cp = config.parallel.cp;
    p.data_replicas = std::max<int64_t>(1, world_size / config.parallel.cp);
    p.rope_theta = config.model.rope_theta;
    p.sliding_rope_theta = config.model.sliding_rope_theta;
    p.schedule = config.schedule;
    plans.push_back(p);
    return plans;
  }
  int64_t first = 0;
  for (size_t i = 0; i < config.phases.size(); ++i) {
    const PhaseConfig& ph = config.phases[i];
    const int64_t group = int64_t(config.parallel.ep) * ph.cp;
    ZAYA_CHECK(world_size % group == 0,
               "{}: phase[{}].cp = {} does not fit the world of {} ranks with parallel.ep = {}; allowed: ep x cp "
               "dividing the world size",
               config.source, i + 1, ph.cp, world_size, config.parallel.ep);
    const int64_t data_replicas = world_size / ph.cp;  // the ep ranks read distinct sequences too
    const int64_t per_step = phase_tokens_per_step(ph, config.run.grad_accum, data_replicas);
    PhasePlan p;
    p.name = ph.name;
    p.first_step = first;
    p.steps = (ph.tokens + per_step - 1) / per_step;
    p.micro_batch = ph.micro_batch;
    p.seq_len = ph.seq_len;
    p.cp = ph.cp;
    p.data_replicas = data_replicas;
    p.rope_theta = ph.rope_theta;
    p.sliding_rope_theta = ph.sliding_rope_theta;
    p.lr_ratio = ph.lr / config.optim.lr;
    // WSD within the phase: warmup, stable, then a linear decay over the last
    // decay_fraction of its steps; decay_fraction = 0 keeps the peak to the end.
    p.schedule.kind = ph.decay_fraction > 0 ? ScheduleKind::kWsd : ScheduleKind::kConstant;
    p.schedule.total_steps = p.steps;
    p.schedule.warmup_steps = ph.warmup_steps;
    p.schedule.decay_fraction = ph.decay_fraction > 0 ? ph.decay_fraction : 1.0;
    p.schedule.min_lr_ratio = ph.min_lr_ratio;
    ZAYA_CHECK(ph.warmup_steps <= p.steps,
               "{}: phase[{}].warmup_steps = {} is invalid; allowed: 0..{}, the phase's steps (tokens {} / {} tokens "
               "per step = {} micro_batch x {} seq_len x {} grad_accum x {} data replicas, rounded up)",
               config.source, i + 1, ph.warmup_steps, p.steps, ph.tokens, per_step, ph.micro_batch, ph.seq_len,
               config.run.grad_accum, data_replicas);
    first += p.steps;
    plans.push_back(p);
  }
  return plans;
}

size_t phase_at_step(const std::vector<PhasePlan>& plans, int64_t step) {
  ZAYA_ASSERT(!plans.empty());
  size_t k = 0;
  while (k + 1 < plans.size() && step >= plans[k + 1].first_step) ++k;
  return k;
}

double phase_lr_multiplier(const PhasePlan& plan, int64_t step) {
  return plan.lr_ratio * lr_multiplier(plan.schedule, step - plan.first_step);
}

std::string describe_phase(const TrainConfig& config, size_t index, const PhasePlan& plan) {
  const int64_t data_replicas = plan.data_replicas;
  std::string line = fmt::format(
      "phase {}/{} '{}': steps {}..{} ({} x {} tokens = {} x {} x {} accum x {} replicas{}), rope_theta {:g}, "
      "lr {:.2e}",
      index + 1, std::max<size_t>(1, config.phases.size()), plan.name, plan.first_step + 1, plan.end_step(), plan.steps,
      plan.micro_batch * plan.seq_len * config.run.grad_accum * data_replicas, plan.micro_batch, plan.seq_len,
      config.run.grad_accum, data_replicas, plan.cp > 1 ? fmt::format(", cp {}", plan.cp) : "", plan.rope_theta,
      config.optim.lr * plan.lr_ratio);
  if (config.model.has_sliding()) line += fmt::format(", sliding_rope_theta {:g}", plan.sliding_rope_theta);
  if (index < config.phases.size()) {
    const PhaseConfig& ph = config.phases[index];
    double total = 0;
    for (const PhaseData& d : ph.data) total += d.weight;
    std::vector<std::string> parts;
    for (const PhaseData& d : ph.data) parts.push_back(fmt::format("{} {:.2f}", d.dir, d.weight / total));
    line +=
        fmt::format(", warmup {}, decay {:g}, data: {}", ph.warmup_steps, ph.decay_fraction, fmt::join(parts, ", "));
  }
  return line;
}

std::string phases_to_toml(const std::vector<PhaseConfig>& phases, bool sliding) {
  std::string s;
  for (const PhaseConfig& p : phases) {
    s += "\n[[phase]]\n" + fields_to_toml(phase_fields(), "phase", p, false, sliding ? "" : "sliding_rope_theta");
    for (const PhaseData& d : p.data) s += "[[phase.data]]\n" + fields_to_toml(phase_data_fields(), "phase.data", d);
  }
  return s;
}

}  // namespace zaya
