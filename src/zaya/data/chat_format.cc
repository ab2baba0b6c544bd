#include "zaya/data/chat_format.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "zaya/core/error.h"
#include "zaya/data/tokenizer_gguf.h"
#include "zaya/io/gguf.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

// ZAYA1-8B's facts (docs/serve.md, "Chat formats"; gathered from public ports
// and parsers, the hub's file unread): each one a row here.
constexpr ChatFormatSpec kZayaSpec = {"<|im_start|>",
                                      "<|im_end|>",
                                      "assistant",
                                      "<think>",
                                      "</think>",
                                      "<zyphra_tool_call>",
                                      "</zyphra_tool_call>",
                                      "<zyphra_tool_response>",
                                      "</zyphra_tool_response>"};
constexpr ChatFormatSpec kGemma3Spec = {"<start_of_turn>", "<end_of_turn>", "model", "", "", "", "", "", ""};

bool template_has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  ZAYA_CHECK(in.good(), "cannot read '{}'", p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The directory a model's side files are in: the directory itself, or a file's (FILE.gguf).
std::filesystem::path model_dir_of(const std::string& model_path) {
  std::error_code ec;
  const std::filesystem::path p(model_path);
  return std::filesystem::is_directory(p, ec) ? p : p.parent_path();
}

}  // namespace

const ChatFormatSpec& chat_format_spec(ChatFormat format) {
  return format == ChatFormat::kZaya ? kZayaSpec : kGemma3Spec;
}

std::optional<ChatFormat> recognise_chat_template(const std::string& t) {
  if (template_has(t, kGemma3Spec.turn_start) && template_has(t, kGemma3Spec.turn_end)) return ChatFormat::kGemma3;
  if (template_has(t, kZayaSpec.turn_start) && template_has(t, kZayaSpec.turn_end) &&
      template_has(t, kZayaSpec.tool_call_open))
    return ChatFormat::kZaya;
  return std::nullopt;
}

std::optional<std::string> model_chat_template(const std::string& model_path, std::string* where) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(model_path, ec) && is_gguf_file(model_path)) {
    const GgufFile f = GgufFile::open(model_path);
    if (f.metadata().has("tokenizer.chat_template")) {
      if (where) *where = model_path + ": tokenizer.chat_template";
      return f.metadata().get_string("tokenizer.chat_template");
    }
  }
  const std::filesystem::path dir = model_dir_of(model_path);
  const std::filesystem::path config = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config, ec)) {
    const nlohmann::json j = read_json_file(config.string(), "tokenizer config");
    if (j.is_object() && j.contains("chat_template")) {
      const nlohmann::json& t = j["chat_template"];
      if (where) *where = config.string() + ": chat_template";
      if (t.is_string()) return t.get<std::string>();
      // The list form: [{"name": "default", "template": "..."}, {"name": "tool_use", ...}].
      ZAYA_CHECK(t.is_array(), "{}: \"chat_template\" is a JSON {}, expected a string or a list of named templates",
                 config.string(), t.type_name());
      for (const nlohmann::json& e : t)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
          return e["template"].get<std::string>();
      fail("{}: \"chat_template\" is a list without an entry named \"default\"", config.string());
    }
  }
  const std::filesystem::path jinja = dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja, ec)) {
    if (where) *where = jinja.string();
    return file_text(jinja);
  }
  return std::nullopt;
}

ChatFormat model_chat_format(const std::string& model_path, const std::string& override_name, std::string* source) {
  if (!override_name.empty()) {
    if (source) *source = "--chat-format";
    return enum_parse<ChatFormat>(kChatFormatNames, override_name, "--chat-format");
  }
  std::string where;
  const std::optional<std::string> t = model_chat_template(model_path, &where);
  if (!t) {
    if (source) *source = "the default (the model has no chat template)";
    return ChatFormat::kGemma3;
  }
  const std::optional<ChatFormat> f = recognise_chat_template(*t);
  ZAYA_CHECK(f.has_value(),
             "{}: the chat template is not one zaya knows (it has neither Gemma 3's <start_of_turn>/<end_of_turn> nor "
             "ZAYA1-8B's <|im_start|>/<|im_end|> with <zyphra_tool_call>); choose the format with --chat-format "
             "({})",
             where, enum_allowed<ChatFormat>(kChatFormatNames));
  if (source) *source = where;
  return *f;
}

}  // namespace zaya
