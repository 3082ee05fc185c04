// Small text files beside the weights (config.json, the index, README.md).
#pragma once

#include <filesystem>
#include <string>

#include "ft/common/result.h"

namespace ft::engine {

// Creates or truncates `path` and writes `text`; kIo naming the path on any failure.
Status write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace ft::engine
