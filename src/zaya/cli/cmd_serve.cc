// zaya serve: an OpenAI-compatible HTTP server on the cached decoder
// (serve/api_server.h has the endpoints, limits and errors; infer/serving_loop.h the batching).
#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/infer/infer_model.h"
#include "zaya/infer/text.h"
#include "zaya/serve/api_server.h"
#include "zaya/serve/model_name.h"

namespace zaya::cli {
namespace {

struct ServeCliOptions {
  std::string model, tokenizer, dtype = "auto", lora;
  ServerOptions server;
  int threads = 0;
  int64_t prefix_cache_mb = 256;
  int64_t kv_cache_mb = 0;
  bool exact = false;
};

void run_serve(ServeCliOptions o) {
  o.server.validate();
  check_weight_dtype_option(o.dtype, "--dtype");
  if (o.server.api_key.empty())
    if (const char* key = std::getenv("ZAYA_API_KEY")) o.server.api_key = key;
  if (o.threads > 0) omp_set_num_threads(o.threads);
  InferLoadOptions lo;
  lo.dtype = o.dtype;
  lo.lora = o.lora;
  auto model = InferModel::open(o.model, lo);
  Tokenizer tok = load_model_tokenizer(o.model, o.tokenizer, model->tokenizer_hint());
  o.server.serving.sample_vocab = check_tokenizer(tok, model->config(), o.model);
  o.server.serving.bf16_activations = !o.exact;
  o.server.serving.prefix_cache_bytes = o.prefix_cache_mb << 20;
  o.server.serving.kv_cache_bytes = o.kv_cache_mb << 20;
  if (o.server.model_name.empty()) {
    o.server.model_name = default_model_name(o.model);
    fmt::print(stderr, "zaya serve: the model id is \"{}\" (from --model's path; --model-name sets another)\n",
               o.server.model_name);
  }
  ApiServer server(*model, tok, o.server);
  server.bind();
  const ServingCounters n = server.counters();
  fmt::print(stderr,
             "zaya serve: model {} ({} weights) on http://{}:{} (batch {}, context {}, KV pool {} pages of {} tokens, "
             "{} bytes each, {:.1f} MB; {}); Ctrl-C stops\n",
             o.server.model_name, model->matrix_dtype(), o.server.host, server.port(), o.server.serving.max_batch,
             o.server.serving.max_context > 0 ? o.server.serving.max_context : model->config().max_position, n.kv_pages,
             o.server.serving.prefix_block, n.kv_page_bytes, double(n.kv_pages) * double(n.kv_page_bytes) / (1 << 20),
             o.server.api_key.empty() ? "no API key" : "API key required");
  std::fflush(stderr);
  server.run_until_signal();
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
  cmd->add_option("--api-key", o->server.api_key,
                  "require \"Authorization: Bearer KEY\" on /v1/* (default: $ZAYA_API_KEY; none when unset)");
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
  cmd->add_option("--max-concurrent", o->server.max_concurrent, "requests generating at once (429 beyond)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-n", o->server.api.max_n, "largest \"n\" (choices per request)")->check(CLI::Range(1, 1024));
  cmd->add_option("--default-max-tokens", o->server.api.default_max_tokens,
                  "chat completions without max_tokens stop after this many tokens")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--max-body-bytes", o->server.max_body_bytes, "largest request body (413 beyond)")
      ->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--request-timeout", o->server.request_timeout,
                  "seconds a request may generate (then it ends, \"length\")");
  cmd->add_option("--io-timeout", o->server.io_timeout, "seconds a read or write on a connection may wait");
  cmd->add_option(
      "--dtype", o->dtype,
      "weights: auto (as stored, memory-mapped), bf16, f32, or int8 (attention, experts and LM head in Q8_0 blocks)");
  cmd->add_option("--lora", o->lora,
                  "apply this LoRA adapter (a PEFT directory) without merging it into the model's files");
  cmd->add_flag("--exact", o->exact,
                "f32 activations in bf16 prefill, f32 KV cache (slower; default: bf16 GEMMs and cache)");
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace zaya::cli
