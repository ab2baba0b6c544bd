#include "zaya/train/phase_controller.h"

#include <fmt/format.h>

#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/data/shard_builder.h"
#include "zaya/data/tokenizer.h"

namespace zaya {
namespace {

std::string path_join(const std::string& a, const std::string& b) { return (std::filesystem::path(a) / b).string(); }

// The model's vocabulary from the token shards' (`what` names them in errors):
// the real size from the data, embedding rows padded to a multiple of 128
// (spec §7, Megatron), unless the config set the sizes explicitly.
void adopt_data_vocab(TrainConfig& config, int64_t data_vocab, const std::string& what) {
  ZayaConfig& mc = config.model;
  if (config.vocab_from_tokenizer) {
    mc.real_vocab_size = data_vocab;
    mc.vocab_size = (data_vocab + 127) / 128 * 128;
  } else {
    ZAYA_CHECK(data_vocab <= mc.real_vocab_size, "{}: {} use a vocabulary of {} ids but model.real_vocab_size is {}",
               config.source, what, data_vocab, mc.real_vocab_size);
  }
}

// Whatever only the end of a run needs is checked now (docs/training.md): the
// tokenizer copied next to the final weights must exist and be the data's.
void check_tokenizer(const TrainConfig& config, int64_t data_vocab, const std::string& what) {
  const std::string& path = config.data.tokenizer;
  if (path.empty()) return;
  std::error_code ec;
  ZAYA_CHECK(std::filesystem::is_regular_file(path, ec),
             "{}: data.tokenizer = '{}' does not exist; set it to the SentencePiece model the shards were built with "
             "(zaya data tokenizer writes OUT.model), or leave it out",
             config.source, path);
  const Tokenizer tok = Tokenizer::load(path);
  ZAYA_CHECK(tok.vocab_size() == data_vocab,
             "{}: data.tokenizer = '{}' has {} pieces, but {} were built with a vocabulary of {} ids; name the "
             "tokenizer the shards were made with",
             config.source, path, tok.vocab_size(), what, data_vocab);
}

// The vocabulary a Megatron dataset's ids must stay below (its index records
// none): the tokenizer's, else the model's explicit real_vocab_size; 0 when
// neither dataset is a Megatron one (zaya shards carry their own).
uint32_t megatron_vocab(const TrainConfig& config, const std::string& train, const std::string& val) {
  std::error_code ec;
  const bool megatron =
      (std::filesystem::exists(train + ".idx", ec) && shard_file_format(train) == ShardFileFormat::kMegatron) ||
      (std::filesystem::exists(val + ".idx", ec) && shard_file_format(val) == ShardFileFormat::kMegatron);
  if (!megatron) return 0;
  if (!config.data.tokenizer.empty()) return uint32_t(Tokenizer::load(config.data.tokenizer).vocab_size());
  ZAYA_CHECK(!config.vocab_from_tokenizer,
             "{}: '{}' is a Megatron indexed dataset, whose index records no vocabulary size; set data.tokenizer to "
             "the SentencePiece model it was made with, or model.real_vocab_size",
             config.source, train);
  return uint32_t(config.model.real_vocab_size);
}

}  // namespace

PhaseController::PhaseController(TrainConfig& config, int64_t world_size, bool synthetic_data)
    : has_phases_(!config.phases.empty()), seed_(config.run.seed) {
  RunConfig& run = config.run;
  plans_ = plan_phases(config, world_size);
  if (has_phases_) {
    run.steps = plans_.back().end_step();
    run.micro_batch = plans_[0].micro_batch;
    run.seq_len = plans_[0].seq_len;
    config.model.rope_theta = plans_[0].rope_theta;
    config.model.sliding_rope_theta = plans_[0].sliding_rope_theta;
  }
  if (synthetic_data) {
    train_data_ = std::make_unique<SyntheticBatchSource>(config.model.real_vocab_size, run.seed);
  } else if (has_phases_) {
    recipe_data_ = std::make_unique<RecipeData>(config);
    adopt_data_vocab(config, recipe_data_->vocab_size(), "the recipe's token shards");
    check_tokenizer(config, recipe_data_->vocab_size(), "the recipe's token shards");
    unigram_entropy_ = zaya::unigram_entropy(recipe_data_->main_train_shard(0));
    auto train = recipe_data_->train_source(0, run.seq_len, run.seed);
    mixture_ = train.get();
    train_data_ = std::move(train);
    val_data_ = recipe_data_->val_source(0, run.seq_len);
  } else {
    const std::string train_prefix =
        config.data.train.empty() ? path_join(config.data.dir, "train") : config.data.train;
    const std::string val_prefix = config.data.val.empty() ? path_join(config.data.dir, "val") : config.data.val;
    const std::string what = config.data.train.empty() ? fmt::format("the token shards in '{}'", config.data.dir)
                                                       : fmt::format("the dataset '{}'", train_prefix);
    std::error_code ec;
    const std::string index = train_prefix + ".idx";
    ZAYA_CHECK(std::filesystem::exists(index, ec),
               "{}: {} does not exist, so there is no training data; make token shards with `zaya data shards "
               "--corpus FILE --tokenizer TOK.model --out DIR` and set data.dir, or set data.train to a dataset "
               "prefix (PREFIX.bin + PREFIX.idx)",
               config.source, index);
    const ShardReadOptions read{ChecksumMode::kAuto, false, megatron_vocab(config, train_prefix, val_prefix)};
    auto train = std::make_unique<ShardBatchSource>(train_prefix, run.seq_len, run.seed, SamplerOrder::kShuffled, read);
    val_data_ = std::make_unique<ShardBatchSource>(val_prefix, run.seq_len, 0, SamplerOrder::kSequential, read);
    adopt_data_vocab(config, train->shard().vocab_size(), what);
    ZAYA_CHECK(val_data_->shard().vocab_size() == train->shard().vocab_size(),
               "{}: the train and val datasets '{}' and '{}' were built with different tokenizers ({} vs {} ids)",
               config.source, train_prefix, val_prefix, train->shard().vocab_size(), val_data_->shard().vocab_size());
    check_tokenizer(config, train->shard().vocab_size(), what);
    unigram_entropy_ = zaya::unigram_entropy(train->shard());
    train_data_ = std::move(train);
  }
}

std::optional<size_t> PhaseController::boundary_at(int64_t step) const {
  if (phase_ + 1 < plans_.size() && step >= plans_[phase_ + 1].first_step) return phase_at_step(plans_, step);
  return std::nullopt;
}

bool PhaseController::enter(size_t phase, TrainConfig& config) {
  if (phase == phase_) return false;
  const PhasePlan& p = plans_[phase];
  phase_ = phase;
  config.run.micro_batch = p.micro_batch;
  config.run.seq_len = p.seq_len;
  config.model.rope_theta = p.rope_theta;
  config.model.sliding_rope_theta = p.sliding_rope_theta;
  if (recipe_data_) {
    auto train = recipe_data_->train_source(phase, p.seq_len, seed_);
    mixture_ = train.get();
    train_data_ = std::move(train);
    val_data_ = recipe_data_->val_source(phase, p.seq_len);
  }
  return true;
}

void PhaseController::skip_after_rollback(size_t bad_phase, const SamplerState& data) {
  if (phase_ == bad_phase)
    train_data_->set_state(data);
  else
    data_after_rollback_.emplace(bad_phase, data);
}

void PhaseController::apply_data_after_rollback() {
  if (data_after_rollback_ && data_after_rollback_->first == phase_) {
    train_data_->set_state(data_after_rollback_->second);
    data_after_rollback_.reset();
  }
}

void PhaseController::save_state(nlohmann::json& state) const {
  const SamplerState data = train_data_->state();
  state["data"] = {{"seed", data.seed}, {"epoch", data.epoch}, {"index", data.index}};
  if (!has_phases_) return;
  // The phase (counted from 1), the step it began at and, with real data, every dataset's position.
  nlohmann::json recipe = {
      {"phase", phase_ + 1}, {"name", plans_[phase_].name}, {"phase_start", plans_[phase_].first_step}};
  if (mixture_ != nullptr) recipe["mixture"] = mixture_state_to_json(mixture_->mixture_state());
  state["recipe"] = recipe;
}

size_t PhaseController::checkpoint_phase(const nlohmann::json& st, int64_t step, const std::string& dir) const {
  if (!has_phases_) return 0;
  // The checkpoint's phase (or, from a checkpoint without one, the phase of its step).
  if (!st.contains("recipe")) return phase_at_step(plans_, step);
  const nlohmann::json& rc = st.at("recipe");
  const int64_t number = rc.at("phase").get<int64_t>(), start = rc.at("phase_start").get<int64_t>();
  ZAYA_CHECK(number >= 1 && size_t(number) <= plans_.size() && plans_[size_t(number) - 1].first_step == start,
             "{}: the checkpoint is in phase {} of its recipe, which began at step {}, but this run has {} "
             "phases{}: the phases' steps depend on their tokens and the global batch (micro_batch x seq_len x "
             "grad_accum x data replicas); resume with the checkpoint's recipe and global batch",
             dir, number, start, plans_.size(),
             number >= 1 && size_t(number) <= plans_.size()
                 ? fmt::format(" and its phase {} begins at step {}", number, plans_[size_t(number) - 1].first_step)
                 : std::string());
  return size_t(number) - 1;
}

void PhaseController::load_data_state(const nlohmann::json& st) {
  const nlohmann::json& d = st.at("data");
  if (mixture_ != nullptr && st.contains("recipe") && st["recipe"].contains("mixture"))
    mixture_->set_mixture_state(mixture_state_from_json(st["recipe"]["mixture"]));
  else if (!has_phases_ == !st.contains("recipe"))  // (a recipe's phase starts its data afresh)
    train_data_->set_state(
        {d.at("seed").get<uint64_t>(), d.at("epoch").get<uint64_t>(), d.at("index").get<uint64_t>()});
}

}  // namespace zaya
