// Template source -> tokens, with Jinja2's whitespace rules applied to the text between tags exactly
// as HF configures them (trim_blocks, lstrip_blocks, keep_trailing_newline=False, "-"/"+" markers):
// whitespace is most of what makes two prompt renderings differ, so it is settled here, once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ft/common/result.h"
#include "jinja/ast.h"

namespace ft::protocol::jinja {

struct Token {
  enum class Type { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Type type;
  std::string text;  // text, name, operator, or the unescaped string literal
  Value number;      // kInt / kFloat
  Pos pos;
};

Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace ft::protocol::jinja
