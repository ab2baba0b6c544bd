// zaya data tokenizer | shards: SentencePiece training and corpus -> token shards.
#include <fmt/format.h>

#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/core/timer.h"
#include "zaya/data/shard_builder.h"
#include "zaya/data/tokenizer.h"

namespace zaya::cli {

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "prepare training data: tokenizer, token shards");
  data->require_subcommand(1);

  auto topt = std::make_shared<TokenizerTrainOptions>();
  auto* tok = data->add_subcommand("tokenizer", "train a SentencePiece tokenizer on a text corpus");
  tok->add_option("--corpus", topt->corpus_path, "UTF-8 text file")->required()->check(CLI::ExistingFile);
  tok->add_option("--out", topt->output_prefix, "output prefix: writes PREFIX.model and PREFIX.vocab")->required();
  tok->add_option("--vocab-size", topt->vocab_size, "number of pieces")->check(CLI::Range(64, 1 << 20));
  tok->add_option("--model-type", topt->model_type, "bpe or unigram")->check(CLI::IsMember({"bpe", "unigram"}));
  tok->add_option("--max-sentences", topt->max_sentences, "cap on training lines (0: all)");
  tok->add_option("--seed", topt->seed, "seed of the line sampling");
  tok->add_option("--threads", topt->num_threads, "SentencePiece trainer threads")->check(CLI::Range(1, 256));
  tok->callback([topt] {
    const double t0 = now_seconds();
    Tokenizer::train(*topt);
    Tokenizer t = Tokenizer::load(topt->output_prefix + ".model");
    fmt::print("wrote {}.model: {} pieces (pad {}, eos {}, bos {}, unk {}) in {:.1f}s\n", topt->output_prefix,
               t.vocab_size(), t.pad_id(), t.eos_id(), t.bos_id(), t.unk_id(), now_seconds() - t0);
  });

  auto sopt = std::make_shared<ShardBuildOptions>();
  auto* shards = data->add_subcommand("shards", "tokenize a corpus into train/val token shards (.bin + .idx)");
  shards->add_option("--corpus", sopt->corpus_path, "UTF-8 text, documents separated by blank lines")
      ->required()
      ->check(CLI::ExistingFile);
  shards->add_option("--tokenizer", sopt->tokenizer_path, "SentencePiece .model")->required()->check(CLI::ExistingFile);
  shards->add_option("--out", sopt->out_dir, "output directory (train.bin/.idx, val.bin/.idx)")->required();
  shards->add_option("--val-fraction", sopt->val_fraction, "share of documents held out for validation")
      ->check(CLI::Range(0.0, 0.999));
  shards->add_option("--seed", sopt->seed, "seed of the train/val split");
  shards->callback([sopt] {
    const double t0 = now_seconds();
    ShardBuildSummary s = build_token_shards(*sopt);
    fmt::print("wrote {}: train {} documents / {} tokens, val {} documents / {} tokens, vocab {}, {:.1f}s\n",
               sopt->out_dir, s.train.documents, s.train.tokens, s.val.documents, s.val.tokens, s.vocab_size,
               now_seconds() - t0);
    fmt::print("unigram entropy of the train split: {:.4f} nats/token\n", s.train_unigram_entropy);
  });
}

}  // namespace zaya::cli
