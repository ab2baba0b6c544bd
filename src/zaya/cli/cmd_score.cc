// zaya score: mean next-token loss of each sequence in a JSON list of token-id
// lists, with the cached decoder (the full-sequence forward with --full-sequence
// or --dump-logits, which needs every logit).
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/cli/commands.h"
#include "zaya/formats/lora_peft.h"
#include "zaya/formats/model_directory.h"
#include "zaya/infer/full_sequence.h"
#include "zaya/infer/sequence_scores.h"
#include "zaya/infer/token_lists.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {

void add_score_command(CLI::App& app) {
  struct Options {
    std::string model, tokens, dump_logits, json_out, lora, dtype = "auto";
    std::string base_dtype = "float";
    bool full_sequence = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("score", "mean loss per sequence of a JSON list of token-id lists");
  cmd->add_option("--model", o->model, "model directory, training checkpoint or .gguf file")->required();
  cmd->add_option("--tokens", o->tokens, "JSON file: [[id, id, ...], ...]")->required()->check(CLI::ExistingFile);
  cmd->add_option("--dump-logits", o->dump_logits, "write the logits as JSON [seq][position][vocab] to this file");
  cmd->add_option("--json", o->json_out, "write the losses as JSON to this file");
  cmd->add_option("--lora", o->lora, "LoRA adapter directory in the PEFT layout, applied unmerged (docs/formats.md)")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--full-sequence", o->full_sequence, "reference path: the training forward pass (no cache)");
  cmd->add_option("--dtype", o->dtype, "the cached decoder's weights, as zaya eval --dtype (docs/inference.md)");
  cmd->add_option("--base-dtype", o->base_dtype,
                  "with --full-sequence: the routed experts held as a QLoRA run holds them ([lora] base_dtype: "
                  "float, mxfp4, fp8 or int8; docs/training.md), a model directory only")
      ->check(CLI::IsMember({"float", "mxfp4", "fp8", "int8"}));
  cmd->callback([o] {
    const nlohmann::json lists = parse_token_lists(o->tokens);  // before the model: a bad file fails at once
    check_weight_dtype_option(o->dtype, "--dtype");
    InferLoadOptions lo;
    lo.lora = o->lora;
    lo.dtype = o->dtype;
    auto im = InferModel::open(o->model, lo);
    const int64_t V = im->config().real_vocab_size;
    const std::vector<std::vector<int32_t>> seqs = token_lists(lists, o->tokens, V);
    std::vector<SequenceScore> scores;
    if (o->full_sequence || !o->dump_logits.empty()) {
      // The training forward over a quantized base: its experts as packed rows (ops/quant_linear.h).
      const LoraBaseDtype base =
          enum_parse(std::span<const EnumName<LoraBaseDtype>>(kLoraBaseDtypeNames), o->base_dtype, "--base-dtype");
      std::unique_ptr<ZayaModel> model = base == LoraBaseDtype::kFloat
                                             ? load_reference_model(o->model)
                                             : load_model_directory(o->model, nullptr, lora_base_expert_type(base));
      std::unique_ptr<LoraAdapters> adapters;
      if (!o->lora.empty()) adapters = read_peft_adapter(o->lora, model->config());
      model->set_lora(adapters.get());  // the training forward's unmerged branches
      scores = score_sequences(*model, seqs, !o->dump_logits.empty());
    } else {
      scores = score_sequences_cached(*im, seqs, o->tokens);
    }
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < scores.size(); ++i) {
      fmt::print("sequence {}: {} tokens scored, mean loss {:.6f} nats/token\n", i, scores[i].tokens,
                 scores[i].mean_loss);
      out.push_back({{"tokens", scores[i].tokens}, {"mean_loss", scores[i].mean_loss}});
    }
    if (!o->json_out.empty()) write_file_atomic(o->json_out, out.dump(1) + "\n");
    if (!o->dump_logits.empty()) write_logits_json(o->dump_logits, scores, V);
  });
}

}  // namespace zaya::cli
