#include "load_traffic.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>

namespace ft::cli {
namespace fs = std::filesystem;
using nlohmann::ordered_json;
using protocol::Dialect;

namespace {

std::optional<Dialect> dialect_of(const std::string& path) {
  const std::string p = path.substr(0, path.find('?'));
  if (p == "/v1/messages") return Dialect::kAnthropic;
  if (p == "/v1/chat/completions") return Dialect::kOpenAIChat;
  if (p == "/v1/responses") return Dialect::kOpenAIResponses;
  return std::nullopt;  // count_tokens, models: not a generation
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The headers that say which agent sent a request (the dashboard's clients table reads the
// User-Agent). Transport headers are the HTTP client's business; keys are never replayed.
HeaderList identity_headers(const ordered_json& headers) {
  HeaderList out;
  if (!headers.is_object()) return out;
  for (const auto& [name, value] : headers.items()) {
    const std::string n = lower(name);
    if (!value.is_string()) continue;
    if (n == "user-agent" || n == "anthropic-version" || n == "anthropic-beta") out.emplace_back(name, value);
  }
  return out;
}

// Puts `tag` in front of a message's text: a string content, or its first text part (a part of
// its own when it has none).
void tag_content(ordered_json& content, const std::string& tag, const char* text_type) {
  if (content.is_string()) {
    content = tag + content.get<std::string>();
    return;
  }
  if (!content.is_array()) return;
  for (auto& part : content) {
    if (part.is_object() && part.value("type", "") == text_type && part["text"].is_string()) {
      part["text"] = tag + part["text"].get<std::string>();
      return;
    }
  }
  content.insert(content.begin(), ordered_json{{"type", text_type}, {"text", tag}});
}

void tag_first_user_message(Dialect dialect, ordered_json& body, const std::string& tag) {
  if (dialect == Dialect::kOpenAIResponses && body["input"].is_string()) {
    body["input"] = tag + body["input"].get<std::string>();
    return;
  }
  ordered_json& items = body[dialect == Dialect::kOpenAIResponses ? "input" : "messages"];
  if (!items.is_array()) return;
  const char* text_type = dialect == Dialect::kOpenAIResponses ? "input_text" : "text";
  for (auto& m : items) {
    if (m.is_object() && m.value("role", "") == "user" && m.contains("content")) {
      tag_content(m["content"], tag, text_type);
      return;
    }
  }
}

}  // namespace

Result<std::vector<Conversation>> load_conversations(const fs::path& root, const std::vector<std::string>& only) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return not_found("no traffic captures at " + root.string());
  std::vector<fs::path> dirs;
  if (only.empty()) {
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.is_directory()) dirs.push_back(e.path());
  } else {
    for (const std::string& name : only) {
      if (!fs::is_directory(root / name, ec)) return not_found("no traffic directory " + (root / name).string());
      dirs.push_back(root / name);
    }
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<Conversation> out;
  for (const fs::path& dir : dirs) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    Conversation c{dir.filename().string(), {}};
    for (const fs::path& f : files) {
      const auto j = ordered_json::parse(std::ifstream(f), nullptr, false);
      if (j.is_discarded() || !j.is_object()) return invalid_argument(f.string() + " is not a JSON capture");
      const auto dialect = dialect_of(j.value("path", ""));
      if (!dialect || j.value("status", 200) != 200 || !j["request"].is_object()) continue;
      c.requests.push_back({j["path"].get<std::string>(), *dialect, j["request"], identity_headers(j["headers"])});
    }
    if (!c.requests.empty()) out.push_back(std::move(c));
  }
  if (out.empty()) return not_found("no chat requests captured under " + root.string());
  return out;
}

fs::path default_traffic_dir() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "tests/fixtures/traffic";
}

ReplayRequest make_replay(const CapturedRequest& request, int variant, std::size_t index, int max_tokens,
                          bool always_stream) {
  ReplayRequest r{request.path, request.dialect, always_stream || (std::size_t(variant) + index) % 4 != 3, "",
                  request.headers};
  ordered_json body = request.body;
  body["temperature"] = 0;
  body.erase("top_p");
  body.erase("top_k");
  body["stream"] = r.stream;
  switch (request.dialect) {
    case Dialect::kAnthropic:
      body["max_tokens"] = max_tokens;
      break;
    case Dialect::kOpenAIChat:
      body.erase("max_completion_tokens");  // it would win over max_tokens
      body["max_tokens"] = max_tokens;
      // Usage (the output token count) comes in a stream only when asked for.
      if (r.stream)
        body["stream_options"] = {{"include_usage", true}};
      else
        body.erase("stream_options");
      break;
    case Dialect::kOpenAIResponses:
      body["max_output_tokens"] = max_tokens;
      break;
  }
  tag_first_user_message(request.dialect, body, "[session variant " + std::to_string(variant) + "] ");
  r.body = body.dump();
  return r;
}

}  // namespace ft::cli
