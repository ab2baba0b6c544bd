// zaya generate: text from a model directory with the cached decoder
// (prefill + token-by-token decode, continuous batching), streaming.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/data/tokenizer.h"
#include "zaya/infer/full_sequence.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/text.h"
#include "zaya/model/hf_checkpoint.h"

namespace zaya::cli {
namespace {

struct GenerateCliOptions {
  std::string model, tokenizer, prompt, prompts_file, json_out, dtype = "auto";
  std::vector<std::string> stop_texts;
  std::vector<int32_t> stop_ids;
  GenerateOptions gen;
  int64_t samples = 1, batch = 8, step_tokens = 256, max_context = 0;
  int threads = 0;
  bool no_bos = false, full_sequence = false, exact = false, stats = false, prefetch = false;
};

// One request per line of a JSONL file: {"prompt": "...", "max_new_tokens": n,
// "seed": s, "temperature": t, "top_k": k, "top_p": p}; only "prompt" is required.
std::vector<std::pair<std::string, GenerationRequest>> read_prompts(const std::string& path,
                                                                    const GenerationRequest& defaults) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot read '{}'", path);
  std::vector<std::pair<std::string, GenerationRequest>> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{}:{}: invalid JSON: {}", path, n, e.what());
    }
    ZAYA_CHECK(j.is_object() && j.contains("prompt") && j["prompt"].is_string(),
               "{}:{}: expected an object with a string \"prompt\"", path, n);
    GenerationRequest r = defaults;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      const auto& v = it.value();
      auto want_int = [&] {
        ZAYA_CHECK(v.is_number_integer(), "{}:{}: \"{}\" = {} must be an integer", path, n, k, v.dump());
        return v.get<int64_t>();
      };
      auto want_num = [&] {
        ZAYA_CHECK(v.is_number(), "{}:{}: \"{}\" = {} must be a number", path, n, k, v.dump());
        return v.get<double>();
      };
      if (k == "prompt") continue;
      if (k == "max_new_tokens")
        r.max_new_tokens = want_int();
      else if (k == "seed")
        r.sampling.seed = uint64_t(want_int());
      else if (k == "temperature")
        r.sampling.temperature = want_num();
      else if (k == "top_k")
        r.sampling.top_k = want_int();
      else if (k == "top_p")
        r.sampling.top_p = want_num();
      else if (k == "id")
        continue;
      else
        fail("{}:{}: unknown key \"{}\"; allowed: prompt, max_new_tokens, seed, temperature, top_k, top_p, id", path, n,
             k);
    }
    try {
      r.sampling.validate();
    } catch (const Error& e) {
      fail("{}:{}: {}", path, n, e.what());
    }
    out.emplace_back(j["prompt"].get<std::string>(), std::move(r));
  }
  ZAYA_CHECK(!out.empty(), "{}: no prompts (one JSON object per line)", path);
  return out;
}

void run_generate(const GenerateCliOptions& o) {
  o.gen.sampling.validate();  // flags first, before any file is read
  check_weight_dtype_option(o.dtype, "--dtype");
  ZAYA_CHECK(o.prompts_file.empty() || o.prompt.empty(), "give --prompt or --prompts, not both");
  ZAYA_CHECK(!o.full_sequence || o.prompts_file.empty(), "--full-sequence runs one prompt; drop --prompts");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  InferLoadOptions lo;
  lo.dtype = o.dtype;
  lo.prefetch = o.prefetch;
  auto model = InferModel::open(o.model, lo);
  Tokenizer tok = Tokenizer::load(default_tokenizer_path(o.model, o.tokenizer, model->tokenizer_hint()));
  const ZayaConfig& c = model->config();
  const int64_t sample_vocab = check_tokenizer(tok, c, o.model);

  GenerationRequest defaults;
  defaults.max_new_tokens = o.gen.max_new_tokens;
  defaults.sampling = o.gen.sampling;
  defaults.stop_ids = o.stop_ids;
  if (defaults.stop_ids.empty()) {
    defaults.stop_ids.push_back(tok.eos_id());
    if (c.eos_token_id != tok.eos_id()) defaults.stop_ids.push_back(int32_t(c.eos_token_id));
  }
  auto encode = [&](const std::string& text) {
    std::vector<int32_t> ids;
    if (!o.no_bos) ids.push_back(tok.bos_id());
    for (int32_t id : tok.encode(text)) ids.push_back(id);
    ZAYA_CHECK(!ids.empty(), "the prompt is empty and --no-bos leaves no token to start from");
    return ids;
  };
  std::vector<std::string> texts;
  std::vector<GenerationRequest> requests;
  if (!o.prompts_file.empty()) {
    for (auto& [text, r] : read_prompts(o.prompts_file, defaults)) {
      r.prompt = encode(text);
      texts.push_back(text);
      requests.push_back(std::move(r));
    }
  } else {
    for (int64_t s = 0; s < o.samples; ++s) {
      GenerationRequest r = defaults;
      r.prompt = encode(o.prompt);
      r.sampling.seed = o.gen.sampling.seed + uint64_t(s);
      texts.push_back(o.prompt);
      requests.push_back(std::move(r));
    }
  }
  const bool jsonl = !o.prompts_file.empty();
  // Text after the first stop string, if any, is cut off (the request stops there too).
  std::vector<TextStream> streams;
  for (size_t i = 0; i < requests.size(); ++i) streams.emplace_back(tok);
  std::vector<std::string> shown(requests.size());
  std::vector<char> stopped_by_text(requests.size(), 0);
  const bool stream_stdout = requests.size() == 1 && !jsonl;
  if (stream_stdout) {
    fmt::print("{}", texts[0]);
    std::fflush(stdout);
  }
  // While streaming, the last (longest stop string - 1) bytes are held back:
  // they may turn out to start a stop string, which is never printed.
  size_t hold = 0;
  for (const std::string& s : o.stop_texts) hold = std::max(hold, s.empty() ? 0 : s.size() - 1);
  size_t printed = 0;  // bytes of shown[0] already on stdout (streaming)
  auto append = [&](size_t i, const std::string& added) {
    // Appends `added`, cutting at the first stop string.
    const size_t before = shown[i].size();
    shown[i] += added;
    for (const std::string& s : o.stop_texts) {
      if (s.empty()) continue;
      const size_t at = shown[i].find(s, before >= s.size() ? before - s.size() + 1 : 0);
      if (at != std::string::npos) {
        shown[i].resize(at);
        stopped_by_text[i] = 1;
      }
    }
  };
  auto emit = [&](bool final) {
    const size_t upto =
        final || stopped_by_text[0] ? shown[0].size() : (shown[0].size() > hold ? shown[0].size() - hold : 0);
    if (upto > printed) {
      fmt::print("{}", shown[0].substr(printed, upto - printed));
      std::fflush(stdout);
      printed = upto;
    }
  };
  auto on_token = [&](size_t i, int32_t id) {
    if (std::find(requests[i].stop_ids.begin(), requests[i].stop_ids.end(), id) != requests[i].stop_ids.end())
      return true;  // the stop token itself is not printed
    append(i, streams[i].push(id));
    if (stream_stdout) emit(false);
    return !stopped_by_text[i];
  };
  // Multi-request output in request order, each printed as soon as it and all before it are done.
  std::vector<char> done(requests.size(), 0);
  std::vector<GenerationResult> finished(requests.size());
  size_t next_to_print = 0;
  auto print_ready = [&] {
    while (next_to_print < requests.size() && done[next_to_print]) {
      const size_t i = next_to_print++;
      if (jsonl) {
        nlohmann::json j = {{"index", i},
                            {"prompt", texts[i]},
                            {"completion", shown[i]},
                            {"tokens", finished[i].tokens},
                            {"finish_reason", stopped_by_text[i] ? "stop" : finish_reason_name(finished[i].finish)}};
        fmt::print("{}\n", j.dump());
      } else if (!stream_stdout) {
        fmt::print("--- sample {} ---\n{}{}\n", i + 1, texts[i], shown[i]);
      }
      std::fflush(stdout);
    }
  };
  auto on_finish = [&](size_t i, const GenerationResult& r) {
    if (!stopped_by_text[i]) append(i, streams[i].flush());
    if (stream_stdout) emit(true);
    finished[i] = r;
    done[i] = 1;
    print_ready();
  };

  GenerationStats st;
  if (o.full_sequence) {
    // The reference path: the training forward over the whole prefix for every token.
    auto full = load_hf_model(o.model);
    GenerateOptions g = o.gen;
    g.stop_ids = requests[0].stop_ids;
    GenerationResult r;
    r.tokens = generate_full_sequence(*full, requests[0].prompt, g, [&](int32_t id) { return on_token(0, id); });
    on_finish(0, r);
  } else {
    GeneratorOptions go;
    go.max_batch = o.batch;
    go.step_tokens = o.step_tokens;
    go.max_context = o.max_context;
    go.sample_vocab = sample_vocab;
    go.bf16_activations = !o.exact;
    generate(*model, requests, go, on_token, on_finish, &st);
  }
  if (stream_stdout) fmt::print("\n");
  std::fflush(stdout);
  if (o.stats && !o.full_sequence) {
    const double decode_ms = st.decode_steps > 0 ? 1e3 * st.decode_seconds / double(st.decode_steps) : 0;
    fmt::print(stderr,
               "zaya generate: {} request(s), {} prompt tokens, {} generated; prefill {:.3f} s ({:.0f} tokens/s), "
               "decode {} steps {:.2f} ms/step ({:.1f} tokens/s), first token after {:.3f} s, weights {} ({})\n",
               st.requests, st.prompt_tokens, st.generated_tokens, st.prefill_seconds,
               st.prefill_seconds > 0 ? double(st.prompt_tokens) / st.prefill_seconds : 0.0, st.decode_steps, decode_ms,
               st.decode_seconds > 0 ? double(st.decode_tokens) / st.decode_seconds : 0.0, st.first_token_seconds,
               model->matrix_dtype(), model->mapped_matrices() > 0 ? "memory-mapped" : "in memory");
  }
  if (!o.json_out.empty()) {
    nlohmann::json j = {{"requests", st.requests},
                        {"prompt_tokens", st.prompt_tokens},
                        {"generated_tokens", st.generated_tokens},
                        {"prefill_seconds", st.prefill_seconds},
                        {"decode_steps", st.decode_steps},
                        {"decode_tokens", st.decode_tokens},
                        {"decode_seconds", st.decode_seconds},
                        {"first_token_seconds", st.first_token_seconds},
                        {"total_seconds", st.total_seconds},
                        {"weights_dtype", model->matrix_dtype()},
                        {"threads", omp_get_max_threads()}};
    std::ofstream f(o.json_out);
    ZAYA_CHECK(f.good(), "cannot write '{}'", o.json_out);
    f << j.dump(2) << "\n";
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateCliOptions>();
  auto* cmd = app.add_subcommand("generate", "generate text from a model directory (cached decoder)");
  cmd->add_option("--model", o->model, "model directory (config.json + safetensors) or training checkpoint (step_N)")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "SentencePiece model (default: MODEL/tokenizer.model)");
  cmd->add_option("--prompt", o->prompt, "text to continue");
  cmd->add_option("--prompts", o->prompts_file,
                  "JSONL file, one {\"prompt\": ...} per line; prints one JSON result per line");
  cmd->add_option("--max-new-tokens", o->gen.max_new_tokens, "tokens to generate")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--temperature", o->gen.sampling.temperature, "0 = greedy");
  cmd->add_option("--top-k", o->gen.sampling.top_k, "keep the k most likely tokens (0: all)");
  cmd->add_option("--top-p", o->gen.sampling.top_p, "nucleus sampling mass");
  cmd->add_option("--seed", o->gen.sampling.seed, "sampling seed (sample i uses seed + i)");
  cmd->add_option("--samples", o->samples, "number of samples of --prompt")->check(CLI::Range(1, 100000));
  cmd->add_option("--batch", o->batch, "sequences decoded together")->check(CLI::Range(1, 4096));
  cmd->add_option("--stop-id", o->stop_ids, "stop after this token id (repeatable; default: EOS)");
  cmd->add_option("--stop", o->stop_texts, "stop when the text contains this string (repeatable; not printed)");
  cmd->add_option("--dtype", o->dtype, "weights: auto (as stored, memory-mapped), bf16 or f32");
  cmd->add_flag("--exact", o->exact, "f32 activations in bf16 prefill (slower; default: bf16 GEMMs)");
  cmd->add_option("--step-tokens", o->step_tokens, "tokens per forward step (prefill chunk)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-context", o->max_context, "cap on prompt + generated tokens (0: as needed)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--prefetch", o->prefetch, "read all weights into the page cache before generating");
  cmd->add_flag("--no-bos", o->no_bos, "do not prepend the BOS token");
  cmd->add_flag("--full-sequence", o->full_sequence, "reference path: re-run the whole prefix per token (slow)");
  cmd->add_flag("--stats", o->stats, "print prefill/decode timings to stderr");
  cmd->add_option("--json", o->json_out, "write the timings as JSON");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace zaya::cli
