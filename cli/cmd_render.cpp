// `freetoken render`: a conversation rendered with a checkpoint's own chat template, as text or as
// token ids, with the semantic boundaries on request.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/model_tokenizer.h"

namespace ft::cli {
namespace {

bool read_text(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

int run_render(const Args& args) {
  const std::string cmd = "render";
  std::string conversation;
  if (!read_text(args.get("conversation"), conversation)) {
    return runtime_error(cmd, "cannot read conversation file " + args.get("conversation"));
  }
  auto tokenizer = proxy::load_model_tokenizer(args.get("tokenizer"));
  if (!tokenizer) return runtime_error(cmd, tokenizer.status().to_string());

  Result<protocol::ChatTemplate> tmpl = unavailable("no template");
  if (args.has("template")) {  // e.g. gpt-oss, whose npm tokenizer package ships no template
    std::string source;
    if (!read_text(args.get("template"), source)) return runtime_error(cmd, "cannot read template " + args.get("template"));
    std::vector<std::pair<std::string, std::string>> special;
    if (tokenizer->bos_token()) special.emplace_back("bos_token", *tokenizer->bos_token());
    if (tokenizer->eos_token()) special.emplace_back("eos_token", *tokenizer->eos_token());
    if (tokenizer->pad_token()) special.emplace_back("pad_token", *tokenizer->pad_token());
    tmpl = protocol::ChatTemplate::create(source, special);
  } else {
    tmpl = protocol::ChatTemplate::from_tokenizer(*tokenizer);
  }
  if (!tmpl) return runtime_error(cmd, tmpl.status().to_string());

  protocol::ChatRenderOptions opts;
  if (args.has("no-generation-prompt")) opts.add_generation_prompt = false;
  if (args.has("enable-thinking")) {
    std::string v = args.get("enable-thinking");
    if (v != "true" && v != "false") return usage_error(cmd, "--enable-thinking takes true or false");
    opts.enable_thinking = v == "true";
  }
  auto rendered = tmpl->render_with_boundaries(conversation, opts);
  if (!rendered) return runtime_error(cmd, rendered.status().to_string());

  if (!args.has("tokens")) {
    std::fwrite(rendered->text.data(), 1, rendered->text.size(), stdout);
    if (args.has("boundaries")) {
      for (const auto& b : rendered->boundaries) {
        std::fprintf(stderr, "boundary %s message=%zu item=%zu char=%zu\n", protocol::boundary_kind_name(b.kind),
                     b.message, b.item, b.char_offset);
      }
    }
    return 0;
  }
  auto ids = protocol::tokenize_chat(*rendered, *tmpl, *tokenizer);
  if (!ids) return runtime_error(cmd, ids.status().to_string());
  for (size_t i = 0; i < ids->size(); ++i) std::printf(i ? " %d" : "%d", (*ids)[i]);
  std::printf("\n");
  if (args.has("boundaries")) {
    for (const auto& b : rendered->boundaries) {
      std::fprintf(stderr, "boundary %s message=%zu item=%zu char=%zu token=%zu\n", protocol::boundary_kind_name(b.kind),
                   b.message, b.item, b.char_offset, b.token_index.value_or(0));
    }
  }
  return 0;
}

}  // namespace

const Command kRenderCommand = {
    "render",
    "render a conversation with a checkpoint's own chat template (text, or token ids)",
    "freetoken render --tokenizer DIR|FILE.gguf --conversation F.json [--template F.jinja] [--tokens] "
    "[--no-generation-prompt] [--enable-thinking true|false] [--boundaries]",
    {{"tokenizer", "DIR|FILE.gguf", "directory with tokenizer.json and tokenizer_config.json, or a GGUF model file", "",
      true},
     {"conversation", "FILE", "JSON {\"messages\": [...], \"tools\": [...]} (OpenAI style)", "", true},
     {"template", "FILE", "Jinja chat template to use instead of the model's", ""},
     {"tokens", "", "print token ids instead of text", ""},
     {"no-generation-prompt", "", "do not open an assistant turn at the end (default: open one)", ""},
     {"enable-thinking", "BOOL", "pass enable_thinking=true|false to the template (default: not passed)", ""},
     {"boundaries", "", "also print message/tool/thinking boundaries to stderr", ""}},
    0,
    run_render,
};

}  // namespace ft::cli
