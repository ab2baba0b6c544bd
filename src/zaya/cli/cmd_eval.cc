// zaya eval: perplexity on held-out text or token shards, and multiple-choice
// log-likelihood scoring from JSONL (lm-evaluation-harness style acc / acc_norm):
// infer/evaluation.h runs each input.
#include <fmt/format.h>
#include <omp.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/infer/evaluation.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/text.h"
#include "zaya/infer/trained_context.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {
namespace {

struct EvalOptions {
  std::string model, tokenizer, json_out, per_item, dtype = "auto", lora;
  std::vector<std::string> texts, shards, mc;
  int64_t context = 0, stride = 0, batch = 16, step_tokens = 512;
  int64_t max_documents = 0, max_tokens = 0, max_items = 0;
  int threads = 0;
  bool exact = false;
  bool no_loss_mask = false;
};

void run_eval(const EvalOptions& o) {
  check_weight_dtype_option(o.dtype, "--dtype");
  ZAYA_CHECK_USAGE(!o.texts.empty() || !o.shards.empty() || !o.mc.empty(),
                   "zaya eval: nothing to evaluate; give --text FILE, --shards PREFIX or --mc FILE.jsonl");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  InferLoadOptions lo;
  lo.dtype = o.dtype;
  lo.lora = o.lora;
  auto model = InferModel::open(o.model, lo);
  const ZayaConfig& c = model->config();
  // The tokenizer: given, or next to the weights; only text needs one.
  const std::string tok_path = default_tokenizer_path(o.model, o.tokenizer, model->tokenizer_hint());
  const std::optional<Tokenizer> tok = load_tokenizer_if_present(o.model, o.tokenizer, model->tokenizer_hint());
  const int64_t vocab = tok ? check_tokenizer(*tok, c, o.model) : c.real_vocab_size;
  ScorerOptions so;
  so.max_batch = o.batch;
  so.step_tokens = o.step_tokens;
  so.score_vocab = vocab;
  so.bf16_activations = !o.exact;
  PerplexityOptions po;
  po.context = o.context;
  po.stride = o.stride;
  po.scorer = so;

  fmt::print("zaya eval: {} ({} weights{}, {} threads), scoring over {} ids\n", o.model, model->matrix_dtype(),
             model->mapped_matrices() > 0 ? ", memory-mapped" : "", omp_get_max_threads(), vocab);
  nlohmann::json out = {{"model", o.model},
                        {"weights_dtype", model->matrix_dtype()},
                        {"threads", omp_get_max_threads()},
                        {"perplexity", nlohmann::json::array()},
                        {"multiple_choice", nlohmann::json::array()}};
  if (!o.texts.empty() || !o.shards.empty()) {
    // A window longer than the training sequences scores untrained positions
    // (red-team M6); the default window is kept (docs/cli.md says why), with a note.
    const int64_t context = perplexity_context(c, o.context);
    const std::optional<TrainedContext> trained = trained_context(o.model);
    fmt::print(stderr, "{}",
               context_note(context, o.context > 0 ? "--context" : "the default: min(max_position_embeddings, 2048)",
                            trained));
    out["context"] = context;
    out["trained_seq_len"] = trained ? nlohmann::json(trained->seq_len) : nlohmann::json(nullptr);
  }
  const DocumentLimits limits{o.max_documents, o.max_tokens};
  auto report_ppl = [&](const std::string& name, const std::string& kind, const PerplexityRun& run) {
    const PerplexityResult& r = run.result;
    const double dt = run.seconds;
    const int64_t bytes = run.bytes;
    std::string bpb = bytes > 0 ? fmt::format(", {:.4f} bits/byte", r.bits_per_byte(bytes)) : "";
    // A shard's loss mask: which targets the tokens are (fine-tuning data), or that it was ignored.
    const ShardLossMask& m = run.loss_mask;
    std::string masked;
    if (!m.path.empty())
      masked = m.applied ? fmt::format(" scored (loss mask {}: {} of {} tokens selected)", m.path, m.selected, m.tokens)
                         : fmt::format(" scored (loss mask {} ignored: --no-loss-mask)", m.path);
    fmt::print(
        "  perplexity {} ({}): {} documents, {} windows, {} tokens{}: loss {:.4f} nats/token, ppl {:.3f}{} "
        "[{:.1f} s, {:.0f} tokens/s]\n",
        name, kind, r.documents, r.windows, r.tokens, masked, r.mean_nll(), r.perplexity(), bpb, dt,
        run.tokens_per_second());
    nlohmann::json j = {
        {"data", name},       {"kind", kind},     {"documents", r.documents}, {"windows", r.windows},
        {"tokens", r.tokens}, {"nll_sum", r.nll}, {"loss", r.mean_nll()},     {"perplexity", r.perplexity()},
        {"seconds", dt}};
    if (bytes > 0) {
      j["bytes"] = bytes;
      j["bits_per_byte"] = r.bits_per_byte(bytes);
    }
    if (kind == "shards") {
      j["loss_mask"] = nullptr;
      if (!m.path.empty()) {
        j["loss_mask"] = {{"file", m.path}, {"applied", m.applied}};
        if (m.applied) {
          j["loss_mask"]["selected"] = m.selected;
          j["loss_mask"]["document_tokens"] = m.tokens;
        }
      }
    }
    out["perplexity"].push_back(j);
  };
  for (const std::string& path : o.texts) {
    ZAYA_CHECK(tok.has_value(), "--text {}: no tokenizer ({} does not exist; give --tokenizer)", path, tok_path);
    report_ppl(path, "text", text_perplexity(*model, *tok, path, limits, po));
  }
  for (const std::string& prefix : o.shards)
    report_ppl(prefix, "shards", shard_perplexity(*model, prefix, limits, po, !o.no_loss_mask));

  std::optional<AtomicFileWriter> per_item;
  if (!o.per_item.empty()) per_item.emplace(o.per_item);
  for (const std::string& path : o.mc) {
    const MultipleChoiceRun run = multiple_choice_file(*model, tok ? &*tok : nullptr, path, o.max_items, so);
    const std::vector<McItem>& items = run.items;
    const McSummary& s = run.summary;
    fmt::print("  multiple choice {}: {} items: acc {:.4f} ± {:.4f}, acc_norm {:.4f} ± {:.4f} [{:.1f} s]\n", path,
               s.items, s.acc, s.acc_stderr, s.acc_norm, s.acc_norm_stderr, run.seconds);
    out["multiple_choice"].push_back({{"data", path},
                                      {"items", s.items},
                                      {"acc", s.acc},
                                      {"acc_stderr", s.acc_stderr},
                                      {"acc_norm", s.acc_norm},
                                      {"acc_norm_stderr", s.acc_norm_stderr},
                                      {"seconds", run.seconds}});
    if (per_item)
      for (size_t i = 0; i < items.size(); ++i) {
        const McItemResult& r = s.per_item[i];
        nlohmann::json j = {{"data", path},          {"index", i},        {"id", items[i].id},
                            {"gold", items[i].gold}, {"pred", r.pred},    {"pred_norm", r.pred_norm},
                            {"logprobs", r.logprob}, {"greedy", r.greedy}};
        per_item->write(j.dump() + "\n");
      }
  }
  if (per_item) per_item->commit();
  if (!o.json_out.empty()) {
    write_file_atomic(o.json_out, out.dump(2) + "\n");
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto* cmd = app.add_subcommand("eval", "perplexity on held-out data and multiple-choice log-likelihood scoring");
  cmd->add_option("--model", o->model, "model directory (config.json + safetensors), training checkpoint or .gguf file")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "SentencePiece model (default: MODEL/tokenizer.model)");
  cmd->add_option("--lora", o->lora,
                  "apply this LoRA adapter (a PEFT directory: adapter_config.json + adapter_model.safetensors) "
                  "without merging it into the model's files");
  cmd->add_option("--text", o->texts,
                  "perplexity of a UTF-8 text file, documents separated by blank lines (repeatable)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--shards", o->shards,
                  "perplexity of a token shard PREFIX (PREFIX.bin/.idx; repeatable); with a loss mask PREFIX.mask "
                  "(zaya data sft) only the targets it selects count, as in training");
  cmd->add_flag("--no-loss-mask", o->no_loss_mask,
                "ignore the shards' loss masks (PREFIX.mask): score every token (the full-sequence perplexity)");
  cmd->add_option("--mc", o->mc, "multiple-choice items, JSONL (docs/inference.md; repeatable)")
      ->check(CLI::ExistingFile);
  cmd->add_option(
         "--context", o->context,
         "perplexity window in tokens (0: min(max_position, 2048)); a note says when it exceeds the seq_len the model "
         "was trained at (a checkpoint's config, or RUN/config.toml beside RUN/final)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--stride", o->stride, "new tokens scored per later window, below --context (0: context - 1)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--batch", o->batch, "sequences scored together")->check(CLI::Range(1, 4096));
  cmd->add_option("--step-tokens", o->step_tokens, "tokens per forward step")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-documents", o->max_documents, "use at most this many documents per file (0: all)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--max-tokens", o->max_tokens, "stop adding documents after this many tokens (0: all)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 50));
  cmd->add_option("--max-items", o->max_items, "use at most this many multiple-choice items (0: all)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--dtype", o->dtype, kWeightDtypeHelp);
  cmd->add_flag("--exact", o->exact,
                "f32 activations with bf16 weights, f32 KV cache (slower; default: bf16 GEMMs and cache)");
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->add_option("--json", o->json_out, "write the results as JSON");
  cmd->add_option("--per-item", o->per_item, "write per-item multiple-choice results as JSONL");
  cmd->callback([o] { run_eval(*o); });
}

}  // namespace zaya::cli
