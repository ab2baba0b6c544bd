#include "zaya/infer/text_request.h"

#include <algorithm>

#include "zaya/core/error.h"

namespace zaya {

std::vector<int32_t> default_stop_ids(const Tokenizer& tok, const ZayaConfig& c) {
  std::vector<int32_t> ids = {tok.eos_id()};
  for (int64_t id : c.stop_token_ids())
    if (std::find(ids.begin(), ids.end(), int32_t(id)) == ids.end()) ids.push_back(int32_t(id));
  return ids;
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok, const std::string& text, bool add_bos) {
  std::vector<int32_t> ids;
  if (add_bos) ids.push_back(tok.bos_id());
  for (int32_t id : tok.encode(text)) ids.push_back(id);
  ZAYA_CHECK(!ids.empty(), "the prompt is empty and --no-bos leaves no token to start from");
  return ids;
}

std::string prepare_text_request(TextRequest& request, const Tokenizer& tok, const ZayaConfig& c, bool add_bos,
                                 int64_t max_context) {
  try {
    request.generation.prompt = encode_prompt(tok, request.prompt, add_bos);
  } catch (const Error& e) {
    return e.what();
  }
  if (request.ignore_eos) request.generation.stop_ids.clear();
  return generation_request_error(request.generation, c, max_context);
}

std::vector<TextRequest> repeat_with_seeds(const TextRequest& request, int64_t count) {
  std::vector<TextRequest> out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(request);
    out.back().generation.sampling.seed = request.generation.sampling.seed + uint64_t(i);
  }
  return out;
}

}  // namespace zaya
