#pragma once
// The LoRA adapters a server serves by name (docs/serve.md "Adapters"):
// `zaya serve --lora NAME=DIR` (repeatable) and, at run time, vLLM's admin
// endpoints POST /v1/load_lora_adapter and /v1/unload_lora_adapter. A request
// picks one by its "model": the base model's name (or no "model") runs the
// base, an adapter's name runs that adapter (infer/step_lora.h: sequences
// with different adapters share a batch), any other name is refused with 404
// naming the field and the served names. A server with no adapter and no
// admin endpoint answers every name with the base, as before adapters.
//
// Unloading takes the name away at once (new requests get 404); requests
// already accepted hold the adapter (a shared pointer) and finish with it,
// and its memory goes when the last of them ends. So an unload never fails a
// request in flight and never waits for one.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zaya/infer/infer_model.h"
#include "zaya/serve/openai_response.h"

namespace zaya {

class LoraRegistry {
 public:
  // `strict`: unknown model names are refused (adapters are served, or may be loaded).
  LoraRegistry(const InferModel& model, std::string base_name, int64_t max_adapters, bool strict);

  // The outcome of an admin call: 200, or the HTTP status, message and the field it names.
  struct Outcome {
    int status = 200;
    std::string message, param;
  };
  // Reads the PEFT adapter at `path` and serves it as `name`. 400 for a bad or
  // taken name, an unreadable or unfitting adapter (the message says why), or
  // more than max_adapters.
  Outcome load(const std::string& name, const std::string& path);
  // Stops serving `name` (404 when it is not served).
  Outcome unload(const std::string& name);

  // The adapter a request's "model" names (null: the base), or why it names none (404, param "model").
  struct Pick {
    std::shared_ptr<const LoraAdapters> lora;
    std::string name;   // the id the response carries
    std::string error;  // non-empty: not served
  };
  Pick pick(const std::string& model) const;

  // /v1/models: the base, then each adapter (parent: the base, root: its directory).
  ojson models(int64_t created) const;
  int64_t size() const;

 private:
  struct Served {
    std::string name, path;
    std::shared_ptr<const LoraAdapters> lora;
    int64_t created = 0;
  };
  std::string served_names() const;  // under mu_

  const InferModel& model_;
  const std::string base_;
  const int64_t max_adapters_;
  const bool strict_;
  mutable std::mutex mu_;
  std::vector<Served> served_;
};

}  // namespace zaya
