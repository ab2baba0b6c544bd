// zaya data tokenizer | shards | sft | read-speed: SentencePiece training, corpus -> token shards,
// fine-tuning data -> shards with loss masks, sampler speed.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/core/timer.h"
#include "zaya/data/sampler_speed.h"
#include "zaya/data/shard_builder.h"
#include "zaya/data/tokenizer.h"

namespace zaya::cli {
namespace {

// Where the corpus comes from: the flags shared by both verbs.
struct CorpusFlags {
  std::string format = "auto";
};

void add_corpus_flags(CLI::App* cmd, CorpusSpec& spec, CorpusFlags& flags) {
  cmd->add_option("--corpus", spec.inputs,
                  "corpus files, directories or glob patterns (repeatable); text or JSONL, plain, .gz or .zst")
      ->required();
  cmd->add_option("--input-format", flags.format,
                  "auto (JSONL for *.jsonl, *.ndjson, *.json, also compressed; else text), text or jsonl")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  cmd->add_option("--field", spec.field, "JSONL: the document's field, a dotted path (meta.body)");
  cmd->add_flag("--skip-bad", spec.skip_bad,
                "skip and count bad records (invalid UTF-8 or JSON, missing field) instead of failing on the first");
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000.0 && u < 4) b /= 1000.0, ++u;
  return fmt::format("{:.1f} {}", b, units[u]);
}

// One progress line: bytes, documents, tokens/s and the ETA from the bytes.
std::string progress_line(const ShardBuildProgress& p) {
  const double frac = p.bytes_total > 0 ? double(p.bytes_read) / double(p.bytes_total) : 1.0;
  const double rate = p.elapsed_s > 0 ? double(p.tokens) / p.elapsed_s : 0.0;
  std::string eta = "--";
  if (frac > 0.0 && frac < 1.0 && !p.finished) {
    const double left = p.elapsed_s * (1.0 - frac) / frac;
    eta = fmt::format("{}m{:02d}s", int(left) / 60, int(left) % 60);
  }
  constexpr int kWidth = 24;
  const int filled = int(frac * kWidth + 0.5);
  return fmt::format("[{}{}] {:5.1f}% {} / {}  {} docs  {:.0f} tokens/s  ETA {}{}{}", std::string(filled, '#'),
                     std::string(kWidth - filled, '.'), 100.0 * frac, human_bytes(double(p.bytes_read)),
                     human_bytes(double(p.bytes_total)), p.documents, rate, eta,
                     p.skipped > 0 ? fmt::format("  {} skipped", p.skipped) : "", p.pass > 1 ? "  (pass 2)" : "");
}

// A progress bar on stderr: redrawn in place on a terminal; a line every 30 s otherwise (logs).
void set_progress(ShardBuildOptions& o) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  o.progress_interval_s = tty ? 0.5 : 30.0;
  o.progress = [tty](const ShardBuildProgress& p) {
    if (tty) {
      fmt::print(stderr, "\r{}\x1b[K{}", progress_line(p), p.finished ? "\n" : "");
    } else {
      fmt::print(stderr, "{}\n", progress_line(p));
    }
    std::fflush(stderr);
  };
}

// `zaya data sft`'s flags that become options.
struct SftFlags {
  std::string loss_on = "assistant";
  std::string pairs = "text";
  std::string format = "zaya";
  std::string chat_format = "gemma3";
  bool quiet = false;
};

}  // namespace

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "prepare training data: tokenizer, token shards, fine-tuning data");
  data->require_subcommand(1);

  auto topt = std::make_shared<TokenizerTrainOptions>();
  auto tflags = std::make_shared<CorpusFlags>();
  auto* tok = data->add_subcommand("tokenizer", "train a SentencePiece tokenizer on a text or JSONL corpus");
  add_corpus_flags(tok, topt->corpus, *tflags);
  tok->add_option("--out", topt->output_prefix, "output prefix: writes PREFIX.model and PREFIX.vocab")->required();
  tok->add_option("--vocab-size", topt->vocab_size, "number of pieces")->check(CLI::Range(64, 1 << 20));
  tok->add_option("--model-type", topt->model_type, "bpe or unigram")->check(CLI::IsMember({"bpe", "unigram"}));
  tok->add_option("--max-sentences", topt->max_sentences, "cap on training lines (0: all)");
  tok->add_option("--seed", topt->seed, "seed of the line sampling");
  tok->add_option("--threads", topt->num_threads, "SentencePiece trainer threads")->check(CLI::Range(1, 256));
  tok->callback([topt, tflags] {
    const double t0 = now_seconds();
    topt->corpus.format = parse_corpus_format(tflags->format);
    const TokenizerTrainSummary s = Tokenizer::train(*topt);
    Tokenizer t = Tokenizer::load(topt->output_prefix + ".model");
    fmt::print("wrote {}.model: {} pieces (pad {}, eos {}, bos {}, unk {}) in {:.1f}s\n", topt->output_prefix,
               t.vocab_size(), t.pad_id(), t.eos_id(), t.bos_id(), t.unk_id(), now_seconds() - t0);
    if (s.skipped > 0) fmt::print("skipped {} bad records (--skip-bad)\n", s.skipped);
  });

  auto sopt = std::make_shared<ShardBuildOptions>();
  auto sflags = std::make_shared<CorpusFlags>();
  auto out_format = std::make_shared<std::string>("zaya");
  auto quiet = std::make_shared<bool>(false);
  auto* shards = data->add_subcommand("shards", "tokenize a corpus into train/val token shards (.bin + .idx)");
  add_corpus_flags(shards, sopt->corpus, *sflags);
  shards->add_option("--tokenizer", sopt->tokenizer_path, "SentencePiece .model")->required()->check(CLI::ExistingFile);
  shards->add_option("--out", sopt->out_dir, "output directory (train.bin/.idx, val.bin/.idx)")->required();
  shards->add_option("--format", *out_format, "zaya (uint32 shards) or megatron (Megatron-LM indexed dataset)")
      ->check(CLI::IsMember({"zaya", "megatron"}));
  shards->add_option("--workers", sopt->workers, "tokenization threads (0: all cores)")->check(CLI::Range(0, 1024));
  shards->add_option("--val-fraction", sopt->val_fraction, "share of documents held out for validation")
      ->check(CLI::Range(0.0, 0.999));
  shards->add_option("--seed", sopt->seed, "seed of the train/val split");
  shards->add_flag("--quiet", *quiet, "no progress bar on stderr");
  shards->callback([sopt, sflags, out_format, quiet] {
    const double t0 = now_seconds();
    sopt->corpus.format = parse_corpus_format(sflags->format);
    sopt->format = parse_dataset_format(*out_format);
    if (!*quiet) set_progress(*sopt);
    ShardBuildSummary s = build_token_shards(*sopt);
    fmt::print("wrote {} ({}): train {} documents / {} tokens, val {} documents / {} tokens, vocab {}, {:.1f}s\n",
               sopt->out_dir, dataset_format_name(sopt->format), s.train.documents, s.train.tokens, s.val.documents,
               s.val.tokens, s.vocab_size, now_seconds() - t0);
    if (s.skipped > 0) fmt::print("skipped {} bad records (--skip-bad); the first: {}\n", s.skipped, s.first_skipped);
    fmt::print("unigram entropy of the train split: {:.4f} nats/token\n", s.train_unigram_entropy);
  });

  auto fopt = std::make_shared<ShardBuildOptions>();
  auto fflags = std::make_shared<SftFlags>();
  auto* sft = data->add_subcommand(
      "sft", "fine-tuning data: chat conversations or prompt/completion pairs (JSONL) -> shards with loss masks");
  sft->add_option("--corpus", fopt->corpus.inputs,
                  "JSONL files, directories or glob patterns (repeatable); plain, .gz or .zst")
      ->required();
  sft->add_option("--tokenizer", fopt->tokenizer_path, "SentencePiece .model (the model's own, e.g. Gemma 3's)")
      ->required()
      ->check(CLI::ExistingFile);
  sft->add_option("--out", fopt->out_dir, "output directory (train/val .bin, .idx and .mask)")->required();
  sft->add_option("--loss-on", fflags->loss_on,
                  "tokens that count for the loss: assistant (every assistant turn), last-assistant, all")
      ->check(CLI::IsMember({"assistant", "last-assistant", "all"}));
  sft->add_option("--pairs", fflags->pairs,
                  "prompt/completion pairs: text (plain prompt + completion) or chat (a user and an assistant turn)")
      ->check(CLI::IsMember({"text", "chat"}));
  sft->add_option("--format", fflags->format, "zaya (uint32 shards) or megatron (Megatron-LM indexed dataset)")
      ->check(CLI::IsMember({"zaya", "megatron"}));
  sft->add_option("--chat-format", fflags->chat_format,
                  "how conversations are rendered: gemma3 (ZAYA1-base) or zaya (ZAYA1-8B: reasoning_content, "
                  "tool_calls, tool messages, tools); the server's --chat-format renders the same")
      ->check(CLI::IsMember({"gemma3", "zaya"}));
  sft->add_flag("--skip-bad", fopt->corpus.skip_bad,
                "skip and count bad records (invalid UTF-8 or JSON, a wrong schema, roles out of order, nothing to "
                "learn) instead of failing on the first");
  sft->add_option("--workers", fopt->workers, "tokenization threads (0: all cores)")->check(CLI::Range(0, 1024));
  sft->add_option("--val-fraction", fopt->val_fraction, "share of examples held out for validation")
      ->check(CLI::Range(0.0, 0.999));
  sft->add_option("--seed", fopt->seed, "seed of the train/val split");
  sft->add_flag("--quiet", fflags->quiet, "no progress bar on stderr");
  sft->callback([fopt, fflags] {
    const double t0 = now_seconds();
    fopt->corpus.format = CorpusFormat::kJsonl;
    fopt->format = parse_dataset_format(fflags->format);
    fopt->sft = SftOptions{parse_loss_on(fflags->loss_on), parse_pair_format(fflags->pairs),
                           enum_parse<ChatFormat>(kChatFormatNames, fflags->chat_format, "--chat-format")};
    if (!fflags->quiet) set_progress(*fopt);
    const ShardBuildSummary s = build_token_shards(*fopt);
    fmt::print(
        "wrote {} ({}, loss on {}): train {} examples / {} tokens ({} in the loss), val {} examples / {} tokens "
        "({} in the loss), vocab {}, {:.1f}s\n",
        fopt->out_dir, dataset_format_name(fopt->format), fflags->loss_on, s.train.documents, s.train.tokens,
        s.train.loss_tokens, s.val.documents, s.val.tokens, s.val.loss_tokens, s.vocab_size, now_seconds() - t0);
    if (s.skipped > 0) fmt::print("skipped {} bad records (--skip-bad); the first: {}\n", s.skipped, s.first_skipped);
  });

  auto ropt = std::make_shared<SamplerSpeedOptions>();
  auto rprefix = std::make_shared<std::string>();
  auto rvocab = std::make_shared<uint32_t>(0);
  auto* read = data->add_subcommand("read-speed", "time the training sampler on a dataset (one rank's batches)");
  read->add_option("--data", *rprefix, "dataset prefix (PREFIX.bin + PREFIX.idx, zaya or Megatron)")->required();
  read->add_option("--seq", ropt->seq, "tokens per sequence")->check(CLI::Range(1, 1 << 24));
  read->add_option("--batch", ropt->batch, "sequences this rank copies per step")->check(CLI::Range(1, 1 << 20));
  read->add_option("--ranks", ropt->ranks, "data-parallel ranks sharing each global draw")
      ->check(CLI::Range(1, 1 << 24));
  read->add_option("--seconds", ropt->min_seconds, "time at least this long")->check(CLI::Range(0.01, 3600.0));
  read->add_option("--vocab", *rvocab, "Megatron datasets: the vocabulary size (0: largest id + 1)");
  read->callback([ropt, rprefix, rvocab] {
    const ShardReader shard = ShardReader::open(*rprefix, {ChecksumMode::kNever, false, *rvocab});
    const SamplerSpeed s = measure_sampler_speed(shard, *ropt);
    fmt::print("{}: {} steps of {} x {} tokens (slice of {} ranks) in {:.2f}s: {:.3g} s/step, {:.3g} tokens/s\n",
               *rprefix, s.steps, ropt->batch, ropt->seq, ropt->ranks, s.seconds, s.seconds_per_step,
               s.tokens_per_second);
  });
}

}  // namespace zaya::cli
