// Constructors of the family parsers, for the factory in output_parser.cpp.
#pragma once

#include <memory>

#include "ft/protocol/output_parser.h"

namespace ft::protocol::detail {

std::unique_ptr<StreamParser> make_qwen_parser(OutputParserOptions options);
std::unique_ptr<StreamParser> make_deepseek_parser(OutputParserOptions options);
std::unique_ptr<StreamParser> make_glm_parser(OutputParserOptions options);
std::unique_ptr<StreamParser> make_harmony_parser(OutputParserOptions options);
std::unique_ptr<StreamParser> make_plain_parser(OutputParserOptions options);

}  // namespace ft::protocol::detail
