// Tokens -> statement tree, following Jinja2's grammar and operator precedence (parser.py), so an
// expression groups the way it does under transformers.
#pragma once

#include <vector>

#include "ft/common/result.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace ft::protocol::jinja {

Result<Body> parse_tokens(std::vector<Token> tokens);

}  // namespace ft::protocol::jinja
