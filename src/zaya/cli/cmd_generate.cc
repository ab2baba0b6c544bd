// zaya generate: text from a model directory with the cached decoder
// (prefill + token-by-token decode, continuous batching), streaming. The
// requests, stop strings and streaming are infer/generate_job.h's; a batch of
// --prompts and its result lines are infer/prompt_batch.h's.
#include <fmt/format.h>
#include <omp.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/data/tokenizer.h"
#include "zaya/infer/full_sequence.h"
#include "zaya/infer/generate_job.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/prompt_batch.h"
#include "zaya/infer/prompt_input.h"
#include "zaya/infer/prompts_file.h"
#include "zaya/infer/spec_decode.h"
#include "zaya/infer/spec_model.h"
#include "zaya/infer/text.h"
#include "zaya/infer/text_request.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {
namespace {

struct GenerateCliOptions {
  std::string model, tokenizer, prompt, prompt_file, prompts_file, json_out, dtype = "auto", lora, spec = "none";
  std::string spec_model;                    // --spec-model: the draft model (infer/spec_model.h)
  int64_t spec_tokens = 0, spec_ngram = 16;  // spec_tokens 0: the method's default (SpecOptions::max_tokens)
  bool spec_fixed = false;
  std::vector<std::string> stop_texts;
  std::vector<int32_t> stop_ids;
  GenerateOptions gen;
  int64_t samples = 1, batch = 8, step_tokens = 256, max_context = 0;
  int threads = 0;
  bool prompt_given = false;  // --prompt, even ""
  bool no_bos = false, full_sequence = false, exact = false, stats = false, prefetch = false, ignore_eos = false;
};

// --prompts: one JSON result line per request, in input order; a request
// that cannot run has an error line, and the command fails once all are out.
void run_prompts(const GenerateCliOptions& o, const InferModel& model, const Tokenizer& tok,
                 const TextRequest& defaults, const GeneratorOptions& go, GenerationStats& st) {
  std::vector<PromptLine> lines = read_prompts_file(o.prompts_file, defaults, std::cin);
  prepare_prompt_lines(lines, tok, model.config(), !o.no_bos, o.max_context);
  size_t failed = 0;
  for (const PromptLine& line : lines)
    if (!line.error.empty() && ++failed <= 10) fmt::print(stderr, "error: {} (this request is skipped)\n", line.error);
  if (failed > 10) fmt::print(stderr, "error: ... and {} more requests that cannot run\n", failed - 10);
  std::fflush(stderr);
  const PromptBatchOutcome out = run_prompt_batch(
      model, tok, lines, go,
      [&](const nlohmann::ordered_json& result) {
        fmt::print("{}\n", result.dump());
        std::fflush(stdout);
      },
      &st);
  if (out.context_limited > 0)
    fmt::print(stderr, "note: {} request{} stopped at the context limit ({} tokens): \"finish_reason\": \"context\"\n",
               out.context_limited, out.context_limited == 1 ? "" : "s", st.context);
  const std::string failure = prompt_batch_failure(lines);
  if (!failure.empty()) fail("{}", failure);
}

// --prompt, --prompt-file or no prompt (BOS only): one request, or --samples
// copies with consecutive seeds, checked before anything is printed.
void run_prompt(const GenerateCliOptions& o, const InferModel& model, const Tokenizer& tok, TextRequest request,
                const GeneratorOptions& go, GenerationStats& st) {
  const std::string source = o.prompt_given           ? "--prompt: "
                             : !o.prompt_file.empty() ? fmt::format("--prompt-file {}: ", input_name(o.prompt_file))
                                                      : "";
  const std::string why =
      prepare_text_request(request, tok, model.config(), !o.no_bos, o.full_sequence ? 0 : o.max_context);
  if (!why.empty()) fail("{}{}", source, why);
  const std::vector<TextRequest> requests = repeat_with_seeds(request, o.samples);

  // One request streams to stdout after its prompt; several are printed in
  // request order, each as soon as it and all before it are done.
  const bool stream_stdout = requests.size() == 1;
  if (stream_stdout) {
    fmt::print("{}", requests[0].prompt);
    std::fflush(stdout);
  }
  size_t at_context = 0;
  InOrderCompletions in_order(requests.size(), [&](size_t i, const TextCompletion& done) {
    if (done.finish == FinishReason::kContext) ++at_context;
    if (!stream_stdout) fmt::print("--- sample {} ---\n{}{}\n", i + 1, requests[i].prompt, done.text);
    std::fflush(stdout);
  });
  TextCallbacks cb;
  if (stream_stdout)
    cb.on_text = [](size_t, std::string_view piece) {
      fmt::print("{}", piece);
      std::fflush(stdout);
    };
  cb.on_finish = [&](size_t i, const TextCompletion& done) { in_order.finished(i, done); };
  int64_t context = 0;
  if (o.full_sequence) {
    // The reference path: the training forward over the whole prefix for every token.
    generate_text_full_sequence(*load_reference_model(o.model), tok, requests[0], cb);
    context = model.config().max_position;
  } else {
    generate_text(model, tok, requests, go, cb, &st);
    context = st.context;
  }
  if (stream_stdout) fmt::print("\n");
  std::fflush(stdout);
  if (at_context == 1 && requests.size() == 1)
    fmt::print(stderr, "note: stopped at the context limit ({} tokens)\n", context);
  else if (at_context > 0)
    fmt::print(stderr, "note: {} of {} samples stopped at the context limit ({} tokens)\n", at_context, requests.size(),
               context);
}

void run_generate(const GenerateCliOptions& o) {
  o.gen.sampling.validate();  // flags first, before any file is read
  check_weight_dtype_option(o.dtype, "--dtype");
  ZAYA_CHECK_USAGE(!o.full_sequence || o.prompts_file.empty(), "--full-sequence runs one prompt; drop --prompts");
  const bool jsonl = !o.prompts_file.empty();
  // A prompt file is read (and checked) before the model.
  const std::string prompt = o.prompt_file.empty() ? o.prompt : read_prompt_file(o.prompt_file, std::cin);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  InferLoadOptions lo;
  lo.dtype = o.dtype;
  lo.lora = o.lora;
  lo.prefetch = o.prefetch;
  auto model = InferModel::open(o.model, lo);
  Tokenizer tok = load_model_tokenizer(o.model, o.tokenizer, model->tokenizer_hint());
  const ZayaConfig& c = model->config();
  const int64_t sample_vocab = check_tokenizer(tok, c, o.model);

  TextRequest defaults;
  defaults.prompt = prompt;
  defaults.generation.max_new_tokens = o.gen.max_new_tokens;
  defaults.generation.sampling = o.gen.sampling;
  defaults.generation.stop_ids = o.stop_ids.empty() ? default_stop_ids(tok, c) : o.stop_ids;
  defaults.stop_strings = o.stop_texts;
  defaults.ignore_eos = o.ignore_eos;
  GeneratorOptions go;
  go.max_batch = o.batch;
  go.step_tokens = o.step_tokens;
  go.max_context = o.max_context;
  go.sample_vocab = sample_vocab;
  go.bf16_activations = !o.exact;
  go.spec.method = parse_spec_method(o.spec);
  go.spec.tokens = o.spec_tokens;
  go.spec.adaptive = !o.spec_fixed;
  go.spec.ngram.max_ngram = o.spec_ngram;
  const std::unique_ptr<InferModel> draft =
      open_spec_model_flag(go.spec, o.spec_model, lo, *model, o.model, tok, sample_vocab);
  ZAYA_CHECK_USAGE(go.spec.method == SpecMethod::kNone || !o.full_sequence,
                   "--spec {} and --full-sequence cannot be combined (the reference path has no cache to roll back)",
                   spec_method_name(go.spec.method));

  GenerationStats st;
  if (jsonl)
    run_prompts(o, *model, tok, defaults, go, st);
  else
    run_prompt(o, *model, tok, defaults, go, st);
  if (o.stats && !o.full_sequence) {
    fmt::print(
        stderr,
        "zaya generate: {} request(s), {} prompt tokens ({} shared), {} generated; prefill {:.3f} s ({:.0f} tokens/s), "
        "decode {} steps {:.2f} ms/step ({:.1f} tokens/s), first token after {:.3f} s, weights {} ({})\n",
        st.requests, st.prompt_tokens, st.shared_prompt_tokens, st.generated_tokens, st.prefill_seconds,
        st.prefill_tokens_per_second(), st.decode_steps, st.decode_ms_per_step(), st.decode_tokens_per_second(),
        st.first_token_seconds, model->matrix_dtype(), model->mapped_matrices() > 0 ? "memory-mapped" : "in memory");
    if (go.spec.method != SpecMethod::kNone)
      fmt::print(stderr,
                 "zaya generate: speculative ({}, K {}{}): {} drafts, {} of {} draft tokens accepted ({:.1f}%), "
                 "{:.2f} tokens per draft step; drafting {:.3f} s of the decode steps' {:.3f} s\n",
                 spec_method_name(go.spec.method), go.spec.max_tokens(), go.spec.adaptive ? " adaptive" : "",
                 st.spec.drafts, st.spec.accepted, st.spec.drafted, 100 * st.spec.acceptance_rate(),
                 st.spec.mean_accepted_length(), st.draft_seconds, st.decode_seconds);
  }
  if (!o.json_out.empty()) {
    nlohmann::json j = {{"requests", st.requests},
                        {"prompt_tokens", st.prompt_tokens},
                        {"shared_prompt_tokens", st.shared_prompt_tokens},
                        {"generated_tokens", st.generated_tokens},
                        {"prefill_seconds", st.prefill_seconds},
                        {"decode_steps", st.decode_steps},
                        {"decode_tokens", st.decode_tokens},
                        {"decode_seconds", st.decode_seconds},
                        {"first_token_seconds", st.first_token_seconds},
                        {"total_seconds", st.total_seconds},
                        {"weights_dtype", model->matrix_dtype()},
                        {"threads", omp_get_max_threads()},
                        {"spec",
                         {{"method", spec_method_name(go.spec.method)},
                          {"draft_model", o.spec_model},
                          {"tokens", go.spec.max_tokens()},
                          {"draft_seconds", st.draft_seconds},
                          {"adaptive", go.spec.adaptive},
                          {"drafts", st.spec.drafts},
                          {"drafted_tokens", st.spec.drafted},
                          {"accepted_tokens", st.spec.accepted},
                          {"acceptance_rate", st.spec.acceptance_rate()},
                          {"mean_accepted_length", st.spec.mean_accepted_length()}}}};
    write_file_atomic(o.json_out, j.dump(2) + "\n");
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateCliOptions>();
  auto* cmd = app.add_subcommand("generate", "generate text from a model directory (cached decoder)");
  cmd->add_option("--model", o->model,
                  "model directory (config.json + safetensors), training checkpoint (step_N) or .gguf file")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "SentencePiece model (default: MODEL/tokenizer.model)");
  cmd->add_option("--lora", o->lora,
                  "apply this LoRA adapter (a PEFT directory: adapter_config.json + adapter_model.safetensors) "
                  "without merging it into the model's files");
  auto* prompt = cmd->add_option("--prompt", o->prompt, "text to continue (none: sample from BOS alone)");
  auto* prompt_file =
      cmd->add_option("-f,--prompt-file", o->prompt_file, "read the prompt from this file ('-': stdin)");
  cmd->add_option("--prompts", o->prompts_file,
                  "JSONL file ('-': stdin), one {\"prompt\": ...} per line; prints one JSON result per line "
                  "(exit 1 after them all when any request cannot run)")
      ->excludes(prompt)
      ->excludes(prompt_file);
  prompt->excludes(prompt_file);
  cmd->add_option("--max-new-tokens", o->gen.max_new_tokens, "tokens to generate")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--temperature", o->gen.sampling.temperature, "0 = greedy");
  cmd->add_option("--top-k", o->gen.sampling.top_k, "keep the k most likely tokens (0: all)");
  cmd->add_option("--top-p", o->gen.sampling.top_p, "nucleus sampling mass");
  cmd->add_option("--seed", o->gen.sampling.seed, "sampling seed (sample i uses seed + i)");
  cmd->add_option("--samples", o->samples, "number of samples of --prompt")->check(CLI::Range(1, 100000));
  cmd->add_option("--batch", o->batch, "sequences decoded together")->check(CLI::Range(1, 4096));
  cmd->add_option("--stop-id", o->stop_ids, "stop after this token id (repeatable; default: EOS)");
  cmd->add_flag("--ignore-eos", o->ignore_eos,
                "run every request to --max-new-tokens: no stop id ends it (stop strings still do; a --prompts "
                "line's \"ignore_eos\" overrides it)")
      ->excludes("--stop-id");
  cmd->add_option("--stop", o->stop_texts, "stop when the text contains this string (repeatable; not printed)");
  cmd->add_option("--dtype", o->dtype, kWeightDtypeHelp);
  cmd->add_flag("--exact", o->exact,
                "f32 activations in bf16 prefill, f32 KV cache (slower; default: bf16 GEMMs and cache)");
  cmd->add_option("--step-tokens", o->step_tokens, "tokens per forward step (prefill chunk)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-context", o->max_context, "cap on prompt + generated tokens (0: as needed)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--prefetch", o->prefetch, "read all weights into the page cache before generating");
  cmd->add_flag("--no-bos", o->no_bos, "do not prepend the BOS token");
  cmd->add_flag("--full-sequence", o->full_sequence, "reference path: re-run the whole prefix per token (slow)");
  cmd->add_flag("--stats", o->stats, "print prefill/decode timings to stderr");
  cmd->add_option("--spec", o->spec,
                  "speculative decoding: none, ngram (draft by looking the last tokens up in the context) or model "
                  "(a draft model, --spec-model; "
                  "the output is unchanged: greedy token for token, sampled in distribution)");
  cmd->add_option("--spec-model", o->spec_model,
                  "speculative decoding with this draft model (a smaller ZAYA model directory, checkpoint or .gguf "
                  "file with the same tokenizer; it has its own cache)");
  cmd->add_option("--spec-tokens", o->spec_tokens,
                  "most draft tokens checked per step (K; default 8 for --spec ngram, 16 for a draft model)")
      ->default_str("8 | 16")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--spec-ngram", o->spec_ngram, "longest n-gram looked up for a draft")->check(CLI::Range(1, 64));
  cmd->add_flag("--spec-fixed", o->spec_fixed, "always draft K tokens when a draft exists (no adaptive back-off)");
  cmd->add_option("--json", o->json_out, "write the timings as JSON");
  cmd->callback([o, cmd] {
    o->prompt_given = cmd->count("--prompt") > 0;
    run_generate(*o);
  });
}

}  // namespace zaya::cli
