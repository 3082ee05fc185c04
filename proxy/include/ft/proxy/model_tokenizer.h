// The tokenizer (and chat template) of the model `--model` names, from either form a model comes
// in: a checkpoint directory (tokenizer.json, tokenizer_config.json, chat_template.*) or a GGUF
// file (its tokenizer.* metadata). Here because it needs both the GGUF reader (engine) and the
// tokenizer (protocol), which do not know each other.
#pragma once

#include <filesystem>

#include "ft/common/result.h"
#include "ft/engine/gguf.h"
#include "ft/protocol/gguf_vocab.h"
#include "ft/protocol/tokenizer.h"

namespace ft::proxy {

// True for a regular file that starts with GGUF's magic (a .gguf file, any part of a split model,
// or an Ollama blob): engine::is_gguf_file.
bool is_gguf_file(const std::filesystem::path& path);

// A directory: protocol::Tokenizer::load. A .gguf file: read_gguf_vocab, then
// Tokenizer::from_gguf. Errors name the path; an unknown GGUF tokenizer is kUnsupported naming
// the tokenizer.ggml.model or tokenizer.ggml.pre value.
Result<protocol::Tokenizer> load_model_tokenizer(const std::filesystem::path& model);

// The tokenizer.* keys of a GGUF file's metadata. tokenizer.ggml.model and .tokens are required;
// the rest may be absent. A key of the wrong type is an error naming it.
Result<protocol::GgufVocab> read_gguf_vocab(const engine::GgufMetadata& metadata);

}  // namespace ft::proxy
