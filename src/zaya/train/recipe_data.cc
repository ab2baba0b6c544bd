#include "zaya/train/recipe_data.h"

#include <filesystem>

#include "zaya/core/error.h"

namespace zaya {
namespace {

std::string prefix_of(const std::string& dir, const char* split) {
  return (std::filesystem::path(dir) / split).string();
}

}  // namespace

RecipeData::RecipeData(const TrainConfig& config) : phases_(config.phases) {
  ZAYA_ASSERT(!phases_.empty());
  std::string vocab_dir;
  auto same_vocab = [&](const ShardReader& shard, const std::string& dir) {
    if (vocab_dir.empty()) {
      vocab_dir = dir;
      vocab_size_ = shard.vocab_size();
    }
    ZAYA_CHECK(shard.vocab_size() == vocab_size_,
               "{}: the datasets of the recipe must share one tokenizer, but '{}' has a vocabulary of {} ids and "
               "'{}' of {}; build every [[phase.data]] dir with the same tokenizer (scripts/prepare-recipe-data.sh)",
               config.source, shard.prefix(), shard.vocab_size(), vocab_dir, vocab_size_);
  };
  for (size_t i = 0; i < phases_.size(); ++i) {
    const PhaseConfig& ph = phases_[i];
    for (size_t k = 0; k < ph.data.size(); ++k) {
      const std::string& dir = ph.data[k].dir;
      auto& train = train_[dir];
      if (!train) {
        train = std::make_unique<ShardReader>(ShardReader::open(prefix_of(dir, "train")));
        same_vocab(*train, dir);
      }
      // Checked now rather than when the run reaches the phase.
      ZAYA_CHECK(train->num_tokens() > uint64_t(ph.seq_len),
                 "{}: phase[{}].data[{}]: '{}' holds {} training tokens, too few for one window of the phase's "
                 "seq_len {}",
                 config.source, i + 1, k + 1, train->prefix(), train->num_tokens(), ph.seq_len);
    }
    const std::string& main = ph.data[ph.main_dataset()].dir;
    const ShardReader val = ShardReader::open(prefix_of(main, "val"));
    same_vocab(val, main);
    ZAYA_CHECK(val.num_tokens() > uint64_t(ph.seq_len),
               "{}: phase[{}]: the validation split '{}' (of its highest-weight dataset) holds {} tokens, too few for "
               "one window of the phase's seq_len {}",
               config.source, i + 1, val.prefix(), val.num_tokens(), ph.seq_len);
  }
}

std::unique_ptr<MixtureBatchSource> RecipeData::train_source(size_t phase, int64_t seq, uint64_t seed) const {
  const PhaseConfig& ph = phases_.at(phase);
  std::vector<const ShardReader*> shards;
  std::vector<double> weights;
  for (const PhaseData& d : ph.data) {
    shards.push_back(train_.at(d.dir).get());
    weights.push_back(d.weight);
  }
  return std::make_unique<MixtureBatchSource>(std::make_unique<MixtureSampler>(shards, weights, seq, seed, phase));
}

std::unique_ptr<ShardBatchSource> RecipeData::val_source(size_t phase, int64_t seq) const {
  const PhaseConfig& ph = phases_.at(phase);
  return std::make_unique<ShardBatchSource>(prefix_of(ph.data[ph.main_dataset()].dir, "val"), seq, 0,
                                            SamplerOrder::kSequential);
}

const ShardReader& RecipeData::main_train_shard(size_t phase) const {
  const PhaseConfig& ph = phases_.at(phase);
  return *train_.at(ph.data[ph.main_dataset()].dir);
}

nlohmann::json mixture_state_to_json(const MixtureState& state) {
  nlohmann::json datasets = nlohmann::json::array();
  for (const SamplerState& s : state.datasets)
    datasets.push_back({{"seed", s.seed}, {"epoch", s.epoch}, {"index", s.index}});
  return {{"position", state.position}, {"datasets", datasets}};
}

MixtureState mixture_state_from_json(const nlohmann::json& j) {
  MixtureState st;
  st.position = j.at("position").get<uint64_t>();
  for (const nlohmann::json& d : j.at("datasets"))
    st.datasets.push_back({d.at("seed").get<uint64_t>(), d.at("epoch").get<uint64_t>(), d.at("index").get<uint64_t>()});
  return st;
}

}  // namespace zaya
