// JSON helpers for the output parsers. nlohmann/json stays inside json_util.cpp: everything here
// speaks std::string, so the family parsers never depend on a JSON library.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ft/protocol/output_parser.h"

namespace ft::protocol::detail {

// Length of the JSON object or array at the start of `s` (which must start with '{' or '['),
// found by tracking brackets and strings only; 0 while it is not closed yet. Tags inside JSON
// strings ("…</tool_call>…") therefore do not end a call early. Validity is checked later.
std::size_t json_container_length(std::string_view s);

// The same scan, resumable: a held-back call is rescanned only from where the last call stopped.
struct JsonScanState {
  std::size_t pos = 0;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  std::size_t length = 0;  // set once the container closed
};
std::size_t json_container_length(std::string_view s, JsonScanState& state);

// `s` parsed as a JSON object and re-serialised compactly (key order kept, invalid UTF-8 replaced);
// nullopt when it is not exactly one JSON object.
std::optional<std::string> normalize_json_object(std::string_view s);

// {"name": "...", "arguments": {...}} (Qwen3/Hermes call body): name and compact arguments.
// "arguments" may also be "parameters", a string holding an object, or absent ({}).
std::optional<std::pair<std::string, std::string>> parse_named_call(std::string_view s);

// How the declared schema types one parameter (coarse: all the conversion needs).
enum class ParamKind { kAbsent, kUnknown, kString, kInteger, kNumber, kBoolean, kObject, kArray, kNull };

// The declared tools' parameter types, parsed once per request.
class ToolSchemas {
 public:
  explicit ToolSchemas(const std::vector<ToolSpec>& tools);
  // kAbsent when the tool or the parameter was not declared (or its schema was not JSON).
  ParamKind kind(std::string_view tool, std::string_view param) const;

 private:
  std::map<std::string, std::map<std::string, ParamKind, std::less<>>, std::less<>> kinds_;
};

// Parameter values written as raw text (XML-style calls), to be typed into a JSON object.
enum class RawValueStyle {
  // Qwen3-Coder / Qwen3.5 (as vLLM's qwen3coder parser): "null" is null; undeclared parameters
  // and string types stay strings; integer/number/boolean/object/array parse, else stay strings;
  // declared-but-unrecognised types parse as JSON when they can.
  kQwenCoder,
  // GLM-4.5+: declared string or undeclared stays the raw string; declared non-string parses as
  // JSON when it can.
  kGlm,
};
std::string arguments_from_raw_params(std::string_view tool,
                                      const std::vector<std::pair<std::string, std::string>>& params,
                                      RawValueStyle style, const ToolSchemas& schemas);

}  // namespace ft::protocol::detail
