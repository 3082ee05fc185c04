#include "load_response.h"

namespace ft::cli {
namespace {

using nlohmann::json;
using protocol::Dialect;

int int_at(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int>() : 0;
}

std::string string_at(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

const json& object_at(const json& j, const char* key) {
  static const json kEmpty = json::object();
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

// Reads {"error": {...}} (OpenAI) or {"type": "error", "error": {...}} (Anthropic); false when
// `j` is not an error.
bool read_error(const json& j, ResponseSummary& s) {
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return false;
  s.error = true;
  s.error_type = string_at(j["error"], "type");
  s.error_message = string_at(j["error"], "message");
  return true;
}

void read_usage(Dialect d, const json& u, ResponseSummary& s) {
  if (d == Dialect::kAnthropic) {
    s.output_tokens = int_at(u, "output_tokens");
    s.cached_tokens = int_at(u, "cache_read_input_tokens");
    s.prompt_tokens = int_at(u, "input_tokens") + s.cached_tokens;
  } else if (d == Dialect::kOpenAIChat) {
    s.output_tokens = int_at(u, "completion_tokens");
    s.prompt_tokens = int_at(u, "prompt_tokens");
    s.cached_tokens = int_at(object_at(u, "prompt_tokens_details"), "cached_tokens");
  } else {
    s.output_tokens = int_at(u, "output_tokens");
    s.prompt_tokens = int_at(u, "input_tokens");
    s.cached_tokens = int_at(object_at(u, "input_tokens_details"), "cached_tokens");
  }
}

void add_part(ResponseSummary& s, const std::string& marker, const std::string& content) {
  s.answer += marker + content;
  s.content_bytes += content.size();
}

}  // namespace

bool retryable_error_type(const std::string& type) {
  return type == "overloaded_error" || type == "rate_limit_error" || type == "rate_limit_exceeded";
}

// The answer is "|kind:content" per part, kinds text, reasoning and tool:NAME, in the order the
// model produced them.
ResponseSummary read_response_body(Dialect d, const std::string& body) {
  ResponseSummary s;
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    s.error = true;
    s.error_message = "the response is not a JSON object";
    return s;
  }
  if (read_error(j, s)) return s;
  if (d == Dialect::kAnthropic) {
    for (const json& b : j.value("content", json::array())) {
      const std::string type = string_at(b, "type");
      if (type == "text") add_part(s, "|text:", string_at(b, "text"));
      if (type == "thinking") add_part(s, "|reasoning:", string_at(b, "thinking"));
      if (type == "tool_use")
        add_part(s, "|tool:" + string_at(b, "name") + ":", b.value("input", json::object()).dump());
    }
  } else if (d == Dialect::kOpenAIChat) {
    const json choices = j.value("choices", json::array());
    const json message = choices.empty() ? json::object() : choices[0].value("message", json::object());
    if (const std::string r = string_at(message, "reasoning_content"); !r.empty()) add_part(s, "|reasoning:", r);
    if (const std::string t = string_at(message, "content"); !t.empty()) add_part(s, "|text:", t);
    for (const json& c : message.value("tool_calls", json::array())) {
      const json& f = object_at(c, "function");
      add_part(s, "|tool:" + string_at(f, "name") + ":", string_at(f, "arguments"));
    }
  } else {
    for (const json& item : j.value("output", json::array())) {
      const std::string type = string_at(item, "type");
      if (type == "function_call") {
        add_part(s, "|tool:" + string_at(item, "name") + ":", string_at(item, "arguments"));
        continue;
      }
      for (const json& part : item.value("content", json::array()))
        add_part(s, type == "reasoning" ? "|reasoning:" : "|text:", string_at(part, "text"));
    }
  }
  read_usage(d, object_at(j, "usage"), s);
  s.complete = true;
  return s;
}

void StreamReader::feed(const char* data, std::size_t n) {
  pending_.append(data, n);
  for (std::size_t end; (end = pending_.find("\n\n")) != std::string::npos;) {
    std::string data_lines;
    std::size_t line_start = 0;
    while (line_start < end) {
      std::size_t nl = pending_.find('\n', line_start);
      if (nl == std::string::npos || nl > end) nl = end;
      const std::string_view line(pending_.data() + line_start, nl - line_start);
      if (line.rfind("data:", 0) == 0) {
        std::string_view v = line.substr(5);
        if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        if (!data_lines.empty()) data_lines += '\n';
        data_lines += v;
      }
      line_start = nl + 1;
    }
    pending_.erase(0, end + 2);
    if (!data_lines.empty()) event(data_lines);
  }
}

void StreamReader::event(const std::string& data) {
  if (data == "[DONE]") {
    summary_.complete = !summary_.error;
    return;
  }
  const json e = json::parse(data, nullptr, false);
  if (e.is_discarded() || !e.is_object()) return;
  if (read_error(e, summary_)) return;
  switch (dialect_) {
    case Dialect::kAnthropic:
      return anthropic(e);
    case Dialect::kOpenAIChat:
      return openai_chat(e);
    case Dialect::kOpenAIResponses:
      return openai_responses(e);
  }
}

void StreamReader::content(const std::string& piece) {
  summary_.answer += piece;
  summary_.content_bytes += piece.size();
  saw_content_ = true;
}

void StreamReader::anthropic(const json& e) {
  const std::string type = string_at(e, "type");
  if (type == "message_start") {
    read_usage(dialect_, object_at(object_at(e, "message"), "usage"), summary_);
  } else if (type == "content_block_start") {
    const json& b = object_at(e, "content_block");
    const std::string kind = string_at(b, "type");
    summary_.answer += kind == "text"       ? "|text:"
                       : kind == "thinking" ? "|reasoning:"
                                            : "|tool:" + string_at(b, "name") + ":";
  } else if (type == "content_block_delta") {
    const json& d = object_at(e, "delta");
    const std::string kind = string_at(d, "type");
    if (kind == "text_delta") content(string_at(d, "text"));
    if (kind == "thinking_delta") content(string_at(d, "thinking"));
    if (kind == "input_json_delta") content(string_at(d, "partial_json"));
  } else if (type == "message_delta") {
    // Anthropic's final usage carries the output count; the prompt counts came with message_start.
    summary_.output_tokens = int_at(object_at(e, "usage"), "output_tokens");
  } else if (type == "message_stop") {
    summary_.complete = !summary_.error;
  }
}

void StreamReader::openai_chat(const json& e) {
  if (e.contains("usage") && e["usage"].is_object()) read_usage(dialect_, e["usage"], summary_);
  const json choices = e.value("choices", json::array());
  if (choices.empty() || !choices[0].is_object()) return;
  const json& d = object_at(choices[0], "delta");
  // One part per run of the same kind: a new kind, or a new tool call, starts a part.
  if (const std::string r = string_at(d, "reasoning_content"); !r.empty()) {
    if (part_ != "reasoning") summary_.answer += "|reasoning:";
    part_ = "reasoning";
    content(r);
  }
  if (const std::string t = string_at(d, "content"); !t.empty()) {
    if (part_ != "text") summary_.answer += "|text:";
    part_ = "text";
    content(t);
  }
  for (const json& c : d.value("tool_calls", json::array())) {
    const json& f = object_at(c, "function");
    if (f.contains("name")) {
      summary_.answer += "|tool:" + string_at(f, "name") + ":";
      part_ = "tool";
    }
    content(string_at(f, "arguments"));
  }
}

void StreamReader::openai_responses(const json& e) {
  const std::string type = string_at(e, "type");
  if (type == "response.output_item.added") {
    const json& item = object_at(e, "item");
    const std::string kind = string_at(item, "type");
    summary_.answer += kind == "function_call" ? "|tool:" + string_at(item, "name") + ":"
                       : kind == "reasoning"   ? "|reasoning:"
                                               : "|text:";
  } else if (type == "response.output_text.delta" || type == "response.reasoning_text.delta" ||
             type == "response.function_call_arguments.delta") {
    content(string_at(e, "delta"));
  } else if (type == "response.completed" || type == "response.incomplete") {
    read_usage(dialect_, object_at(object_at(e, "response"), "usage"), summary_);
    summary_.complete = !summary_.error;
  } else if (type == "response.failed" || type == "error") {
    summary_.error = true;
    const json& err = e.contains("response") ? object_at(object_at(e, "response"), "error") : e;
    summary_.error_type = string_at(err, "code");
    summary_.error_message = string_at(err, "message");
  }
}

}  // namespace ft::cli
