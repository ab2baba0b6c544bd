// zaya serve: an OpenAI-compatible HTTP server on the cached decoder
// (serve/api_server.h has the endpoints, limits and errors; infer/serving_loop.h the batching).
#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "zaya/cli/commands.h"
#include "zaya/core/enum_names.h"
#include "zaya/core/error.h"
#include "zaya/core/exit_codes.h"
#include "zaya/data/chat_format.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/spec_decode.h"
#include "zaya/infer/spec_model.h"
#include "zaya/infer/text.h"
#include "zaya/infer/trained_context.h"
#include "zaya/io/json_file.h"
#include "zaya/serve/api_server.h"
#include "zaya/serve/model_name.h"

namespace zaya::cli {
namespace {

struct ServeCliOptions {
  std::string model, tokenizer, dtype = "auto";
  std::vector<std::string> lora;  // DIR (the model's own adapter) or NAME=DIR, repeatable
  std::string chat_format, thinking = "on";
  ServerOptions server;
  int threads = 0;
  int64_t prefix_cache_mb = 256;
  int64_t kv_cache_mb = 0;
  std::string spec = "none";  // speculative decoding (infer/spec_decode.h)
  std::string spec_model;     // --spec-model: the draft model (infer/spec_model.h)
  bool spec_fixed = false;
  bool exact = false;
  bool api_key_given = false;  // --api-key was on the command line (an empty value is refused, not "no key")
};

// --lora DIR (one adapter for every request, as zaya generate --lora) or
// --lora NAME=DIR, repeatable (adapters a request picks by "model"); not both.
std::string split_lora_flags(const std::vector<std::string>& flags, ServerOptions& server) {
  std::string whole;
  for (const std::string& f : flags) {
    const size_t eq = f.find('=');
    std::error_code ec;
    if (eq == std::string::npos || eq == 0 || std::filesystem::is_directory(f, ec)) {
      ZAYA_CHECK_USAGE(whole.empty(), "--lora DIR is given twice ({} and {}); several adapters are --lora NAME=DIR",
                       whole, f);
      whole = f;
    } else {
      server.loras.emplace_back(f.substr(0, eq), f.substr(eq + 1));
    }
  }
  ZAYA_CHECK_USAGE(whole.empty() || server.loras.empty(),
                   "--lora {} (an adapter for every request) and --lora NAME=DIR (adapters chosen by \"model\") "
                   "cannot be mixed; name it too: --lora NAME={}",
                   whole, whole);
  return whole;
}

void run_serve(ServeCliOptions o) {
  const std::string whole_lora = split_lora_flags(o.lora, o.server);
  o.server.serving.spec.method = parse_spec_method(o.spec);
  o.server.serving.spec.adaptive = !o.spec_fixed;
  if (o.spec_model.empty()) o.server.serving.spec.validate();  // with a draft model: once it is open
  check_weight_dtype_option(o.dtype, "--dtype");
  // An empty key would silently serve without one (`--api-key "$UNSET"`): refuse it.
  ZAYA_CHECK_USAGE(!o.api_key_given || !o.server.api_key.empty(),
                   "--api-key is empty; give a key, or leave the flag out to serve without one");
  if (!o.api_key_given)
    if (const char* key = std::getenv("ZAYA_API_KEY")) {
      ZAYA_CHECK_USAGE(*key != '\0', "ZAYA_API_KEY is set but empty; set a key, or unset it to serve without one");
      o.server.api_key = key;
    }
  o.server.validate();  // after the key: --lora-admin needs one
  if (o.threads > 0) omp_set_num_threads(o.threads);
  InferLoadOptions lo;
  lo.dtype = o.dtype;
  lo.lora = whole_lora;
  auto model = InferModel::open(o.model, lo);
  Tokenizer tok = load_model_tokenizer(o.model, o.tokenizer, model->tokenizer_hint());
  o.server.serving.sample_vocab = check_tokenizer(tok, model->config(), o.model);
  const std::unique_ptr<InferModel> draft = open_spec_model_flag(o.server.serving.spec, o.spec_model, lo, *model,
                                                                 o.model, tok, o.server.serving.sample_vocab);
  o.server.serving.bf16_activations = !o.exact;
  o.server.serving.prefix_cache_bytes = o.prefix_cache_mb << 20;
  o.server.serving.kv_cache_bytes = o.kv_cache_mb << 20;
  std::string format_source;
  o.server.api.chat_format = model_chat_format(o.model, o.chat_format, &format_source);
  o.server.api.enable_thinking = o.thinking == "on";
  fmt::print(stderr, "zaya serve: chat format {} (from {})\n",
             enum_name<ChatFormat>(kChatFormatNames, o.server.api.chat_format), format_source);
  if (const char* replies = std::getenv("ZAYA_SERVE_TEST_REPLIES"); replies && *replies) {
    const nlohmann::json j = parse_json(replies, "$ZAYA_SERVE_TEST_REPLIES");
    ZAYA_CHECK_USAGE(j.is_array() && !j.empty(), "$ZAYA_SERVE_TEST_REPLIES must be a JSON list of reply texts");
    for (const nlohmann::json& r : j) {
      ZAYA_CHECK_USAGE(r.is_string(), "$ZAYA_SERVE_TEST_REPLIES must be a JSON list of reply texts");
      o.server.test_replies.push_back(r.get<std::string>());
    }
    fmt::print(stderr,
               "note: $ZAYA_SERVE_TEST_REPLIES is set: chat answers are its texts, not the model's (a test "
               "hook)\n");
  }
  if (o.server.model_name.empty()) {
    o.server.model_name = default_model_name(o.model);
    fmt::print(stderr, "zaya serve: the model id is \"{}\" (from --model's path; --model-name sets another)\n",
               o.server.model_name);
  }
  const int64_t positions = model->config().max_position;
  if (o.server.serving.max_context > positions) {
    fmt::print(stderr, "note: --max-context {} is above the model's max_position_embeddings ({}); using {}\n",
               o.server.serving.max_context, positions, positions);
    o.server.serving.max_context = positions;
  }
  if (o.server.host != "127.0.0.1" && o.server.host != "localhost" && o.server.host != "::1")
    fmt::print(stderr,
               "note: --host {} listens beyond this machine: put a TLS-terminating reverse proxy with its own limits "
               "in front, and use an API key (docs/serve.md, \"Security and limits\")\n",
               o.server.host);
  int64_t cut = 0;
  {
    ApiServer server(*model, tok, o.server);
    server.bind();
    const ServingCounters n = server.counters();
    fmt::print(stderr,
               "zaya serve: model {} ({} weights) on http://{}:{} (batch {}, context {}, KV pool {} pages of {} "
               "tokens, {} bytes each, {:.1f} MB; {}); Ctrl-C stops\n",
               o.server.model_name, model->matrix_dtype(), o.server.host, server.port(), o.server.serving.max_batch,
               server.context(), n.kv_pages, o.server.serving.prefix_block, n.kv_page_bytes,
               double(n.kv_pages) * double(n.kv_page_bytes) / (1 << 20),
               o.server.api_key.empty() ? "no API key" : "API key required");
    if (!o.server.loras.empty() || o.server.lora_admin) {
      std::string names;
      for (const auto& [name, dir] : o.server.loras) names += (names.empty() ? "" : ", ") + name;
      fmt::print(stderr,
                 "zaya serve: LoRA adapters: {} (a request picks one by \"model\"; \"{}\" is the base; other names "
                 "get 404){}\n",
                 names.empty() ? "none yet" : names, o.server.model_name,
                 o.server.lora_admin ? "; /v1/load_lora_adapter and /v1/unload_lora_adapter are on" : "");
    }
    // Positions past the training length were never trained (red-team M6): say so, as zaya eval does.
    if (const std::optional<TrainedContext> trained = trained_context(o.model);
        trained && server.context() > trained->seq_len)
      fmt::print(stderr,
                 "note: the model was trained on sequences of {} tokens ({}); text past that position is "
                 "untrained and degrades; --max-context {} keeps every request within it\n",
                 trained->seq_len, trained->source, trained->seq_len);
    std::fflush(stderr);
    cut = server.run_until_signal();
  }
  if (cut > 0) {
    fmt::print(stderr,
               "zaya serve: stopped; {} request(s) were still running after --shutdown-grace ({} s) and got an error\n",
               cut, o.server.shutdown_grace);
    std::fflush(stderr);
    std::exit(kExitRequestsCut);
  }
  fmt::print(stderr, "zaya serve: stopped; every request in flight finished\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeCliOptions>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat, streaming, metrics)");
  cmd->add_option("--model", o->model,
                  "model directory (config.json + safetensors), training checkpoint (step_N) or .gguf file")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "SentencePiece model (default: MODEL/tokenizer.model)");
  cmd->add_option("--host", o->server.host, "address to listen on (loopback by default; 0.0.0.0: every interface)");
  cmd->add_option("--port", o->server.port, "port (0: any free one, printed at start)")->check(CLI::Range(0, 65535));
  cmd->add_option("--model-name", o->server.model_name,
                  "the model id clients see (default: the run's name for RUN/final, else the model's file name)");
  CLI::Option* api_key =
      cmd->add_option("--api-key", o->server.api_key,
                      "require \"Authorization: Bearer KEY\" on /v1/* (default: $ZAYA_API_KEY, which keeps the key out "
                      "of `ps`; none when unset; an empty key is refused)");
  cmd->add_option("--batch", o->server.serving.max_batch, "sequences decoded together")->check(CLI::Range(1, 4096));
  cmd->add_option("--max-context", o->server.serving.max_context,
                  "tokens per sequence, prompt included (0: max_position_embeddings)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--step-tokens", o->server.serving.step_tokens, "tokens per forward step (prefill chunk)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-queue", o->server.serving.max_waiting, "sequences waiting beyond the batch (503 beyond)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--kv-cache-mb", o->kv_cache_mb,
                  "KV page pool shared by the running sequences and the prefix snapshots (0: the batch at full "
                  "context plus --prefix-cache-mb); requests wait for pages beyond it")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--prefix-cache-mb", o->prefix_cache_mb,
                  "prefix caching (shared pages of repeated prompt prefixes; 0: off); with --kv-cache-mb 0, this much "
                  "is added to the pool for them")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--prefix-block", o->server.serving.prefix_block,
                  "tokens per KV page (prefix snapshots are taken at multiples of it)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--spec", o->spec,
                  "speculative decoding: none, ngram (drafts looked up in each sequence's context) or model (a draft "
                  "model, --spec-model; greedy text unchanged, samples in distribution)");
  cmd->add_option("--spec-model", o->spec_model,
                  "speculative decoding with this draft model (a smaller ZAYA model directory, checkpoint or .gguf "
                  "file with the same tokenizer; it has its own cache)");
  cmd->add_option("--spec-tokens", o->server.serving.spec.tokens,
                  "most draft tokens checked per step (K; default 8 for --spec ngram, 16 for a draft model)")
      ->default_str("8 | 16")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--spec-ngram", o->server.serving.spec.ngram.max_ngram, "longest n-gram looked up for a draft")
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--spec-fixed", o->spec_fixed, "always draft K tokens when a draft exists (no adaptive back-off)");
  cmd->add_option("--max-concurrent", o->server.max_concurrent, "requests generating at once (429 beyond)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-n", o->server.api.max_n, "largest \"n\" (choices per request)")->check(CLI::Range(1, 1024));
  cmd->add_option("--default-max-tokens", o->server.api.default_max_tokens,
                  "chat completions without max_tokens stop after this many tokens")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--max-body-bytes", o->server.max_body_bytes, "largest request body (413 beyond)")
      ->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--request-timeout", o->server.request_timeout,
                  "seconds a request may generate (then it ends with an error, code request_timeout)");
  cmd->add_option("--io-timeout", o->server.io_timeout, "seconds a read or write on a connection may wait");
  cmd->add_option("--read-deadline", o->server.read_deadline,
                  "seconds for a request's head and body to arrive (408 and a close beyond)");
  cmd->add_option("--shutdown-grace", o->server.shutdown_grace,
                  "seconds requests in flight may finish after SIGTERM/SIGINT (new ones get 503); those still "
                  "running then get an error and the exit code is 3");
  cmd->add_option("--dtype", o->dtype, kWeightDtypeHelp);
  cmd->add_option("--lora", o->lora,
                  "LoRA adapters (PEFT directories), applied unmerged: NAME=DIR (repeatable) serves DIR as model "
                  "NAME beside the base (a request picks it by \"model\"; mixed in one batch); a lone DIR applies "
                  "to every request");
  cmd->add_option("--max-loras", o->server.max_loras, "most LoRA adapters loaded at once")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--lora-admin", o->server.lora_admin,
                "POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's) load and unload adapters at run "
                "time; needs --api-key");
  cmd->add_flag("--lora-admin-without-key", o->server.lora_admin_without_key,
                "--lora-admin without an API key (anyone who reaches the port loads files: trusted networks only)");
  cmd->add_option("--chat-format", o->chat_format,
                  "chat format: gemma3 (ZAYA1-base) or zaya (ZAYA1-8B: thinking, tool calls); default: the one the "
                  "model's tokenizer_config.json chat_template is written for, else gemma3")
      ->check(CLI::IsMember({"gemma3", "zaya"}));
  cmd->add_option("--thinking", o->thinking,
                  "zaya format: whether a chat answer starts with reasoning when the request does not say "
                  "(chat_template_kwargs.enable_thinking)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--max-tools", o->server.api.max_tools, "most tools one chat request may offer (400 beyond)")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--exact", o->exact,
                "f32 activations in bf16 prefill, f32 KV cache (slower; default: bf16 GEMMs and cache)");
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->callback([o, api_key] {
    o->api_key_given = api_key->count() > 0;
    if (o->server.lora_admin_without_key) o->server.lora_admin = true;
    run_serve(*o);
  });
}

}  // namespace zaya::cli
