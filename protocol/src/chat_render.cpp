// ChatTemplate: builds the variables transformers passes to a chat template and renders it.
#include "ft/protocol/chat_render.h"

#include <algorithm>
#include <ctime>
#include <regex>

#include "chat_render_internal.h"
#include "ft/protocol/jinja.h"
#include "ft/protocol/tokenizer.h"

namespace ft::protocol {

using jinja::CallArgs;
using jinja::Dict;
using jinja::Value;

const char* boundary_kind_name(ChatBoundary::Kind kind) {
  switch (kind) {
    case ChatBoundary::Kind::kMessage: return "message";
    case ChatBoundary::Kind::kThinking: return "thinking";
    case ChatBoundary::Kind::kToolCall: return "tool_call";
    case ChatBoundary::Kind::kToolResult: return "tool_result";
    case ChatBoundary::Kind::kGenerationPrompt: return "generation_prompt";
  }
  return "?";
}

namespace {

// Literal special-token spellings in the template: <|...|>, <｜...｜> and plain tags like <think>.
std::vector<std::string> find_markers(std::string_view source) {
  static const std::regex kTag(R"(<[^<>\s'"{}=,()\\]{1,64}>)");
  std::vector<std::string> out;
  std::string src(source);
  for (auto it = std::sregex_iterator(src.begin(), src.end(), kTag); it != std::sregex_iterator(); ++it) {
    std::string m = it->str();
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  }
  return out;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::create(std::string_view source,
                                          std::vector<std::pair<std::string, std::string>> special_tokens) {
  FT_ASSIGN_OR_RETURN(jinja::Template tmpl, jinja::Template::parse(source));
  std::vector<std::string> markers = find_markers(source);
  for (const auto& [name, value] : special_tokens) {  // {{ bos_token }} prints a marker too
    if (!value.empty() && std::find(markers.begin(), markers.end(), value) == markers.end()) markers.push_back(value);
  }
  auto impl = std::make_shared<Impl>(Impl{std::move(tmpl), std::move(special_tokens), std::move(markers)});
  ChatTemplate t;
  t.impl_ = std::move(impl);
  return t;
}

Result<ChatTemplate> ChatTemplate::from_tokenizer(const Tokenizer& tokenizer) {
  if (tokenizer.chat_template().empty())
    return not_found(
        "the model ships no chat template (chat_template.jinja, tokenizer_config.json or GGUF "
        "tokenizer.chat_template)");
  std::vector<std::pair<std::string, std::string>> special;
  if (tokenizer.bos_token()) special.emplace_back("bos_token", *tokenizer.bos_token());
  if (tokenizer.eos_token()) special.emplace_back("eos_token", *tokenizer.eos_token());
  if (tokenizer.pad_token()) special.emplace_back("pad_token", *tokenizer.pad_token());
  return create(tokenizer.chat_template(), std::move(special));
}

const std::vector<std::string>& ChatTemplate::markers() const {
  static const std::vector<std::string> kNone;
  return impl_ ? impl_->markers : kNone;
}

Result<Conversation> parse_conversation(std::string_view json, const ChatRenderOptions& options) {
  FT_ASSIGN_OR_RETURN(Value root, jinja::from_json(json));
  if (!root.is_dict()) return invalid_argument("conversation: expected a JSON object");
  Conversation c;
  const Value* messages = root.as_dict().find("messages");
  if (!messages || !messages->is_list()) return invalid_argument("conversation: \"messages\" must be an array");
  c.messages = messages->as_list();
  const Value* tools = root.as_dict().find("tools");
  c.tools = tools ? *tools : Value::none();
  const Value* agp = root.as_dict().find("add_generation_prompt");
  c.add_generation_prompt = options.add_generation_prompt.value_or(agp && agp->kind() == Value::Kind::kBool ? agp->as_bool() : true);
  const Value* think = root.as_dict().find("enable_thinking");
  if (options.enable_thinking) c.enable_thinking = Value::boolean(*options.enable_thinking);
  else if (think) c.enable_thinking = *think;
  if (const Value* kw = root.as_dict().find("chat_template_kwargs")) {
    if (!kw->is_dict()) return invalid_argument("conversation: \"chat_template_kwargs\" must be an object");
    c.kwargs = kw->as_dict();
  }
  c.now_unix_seconds = options.now_unix_seconds;
  return c;
}

Result<std::string> render_conversation(const ChatTemplate::Impl& impl, const Conversation& c, const List& messages,
                                        bool add_generation_prompt) {
  // The variables of transformers' apply_chat_template, in its order: messages, tools, documents,
  // add_generation_prompt, the special-tokens map, then the caller's kwargs (which win).
  Dict ctx;
  ctx.set("messages", Value::list(messages));
  ctx.set("tools", c.tools);
  ctx.set("documents", Value::none());
  ctx.set("add_generation_prompt", Value::boolean(add_generation_prompt));
  for (const auto& [k, v] : impl.special_tokens) ctx.set(k, Value::string(v));
  if (!c.enable_thinking.is_undefined()) ctx.set("enable_thinking", c.enable_thinking);
  for (const auto& [k, v] : c.kwargs.entries()) ctx.set(k, v);
  if (c.now_unix_seconds) {
    std::time_t t = static_cast<std::time_t>(*c.now_unix_seconds);
    ctx.set("strftime_now", Value::callable("strftime_now", [t](const CallArgs& a) -> Result<Value> {
              if (a.positional.empty() || !a.positional[0].is_string()) return invalid_argument("strftime_now needs a format");
              std::tm tm{};
              gmtime_r(&t, &tm);
              char buf[256];
              size_t n = std::strftime(buf, sizeof buf, a.positional[0].as_string().c_str(), &tm);
              return Value::string(std::string(buf, n));
            }));
  }
  return impl.tmpl.render(Value::dict(std::move(ctx)));
}

Result<std::string> ChatTemplate::render(std::string_view conversation_json, const ChatRenderOptions& options) const {
  if (!impl_) return invalid_argument("ChatTemplate is empty");
  FT_ASSIGN_OR_RETURN(Conversation c, parse_conversation(conversation_json, options));
  return render_conversation(*impl_, c, c.messages, c.add_generation_prompt);
}

}  // namespace ft::protocol
