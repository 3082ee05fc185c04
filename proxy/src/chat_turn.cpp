#include "chat_turn.h"

#include <chrono>

#include "ft/protocol/client_responses.h"
#include "ft/protocol/output_parser.h"
#include "stop_matcher.h"

namespace ft::proxy {
namespace {

using protocol::ApiError;
using protocol::ApiErrorKind;
using protocol::Dialect;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

engine::SamplingParams sampling_for(const protocol::ChatRequest& r) {
  engine::SamplingParams p;
  p.temperature = float(r.sampling.temperature.value_or(1.0));
  p.greedy = p.temperature <= 0.f;
  p.top_p = float(r.sampling.top_p.value_or(1.0));
  p.top_k = r.sampling.top_k.value_or(0);
  p.min_p = float(r.sampling.min_p.value_or(0.0));
  p.seed = r.sampling.seed.value_or(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
  return p;
}

ApiError to_api_error(const Status& st) {
  ApiError e = protocol::api_error_from_status(st);
  if (st.code() == ErrorCode::kUnavailable && st.message().rfind("overloaded", 0) == 0) {
    e.kind = ApiErrorKind::kOverloaded;
    e.retry_after_s = 1;
  }
  return e;
}

// Tokens -> text -> (stop strings) -> output parser events, shared by both response modes.
class OutputPipeline {
 public:
  OutputPipeline(const ChatContext& ctx, const PreparedTurn& turn)
      : decoder_(ctx.tokenizer, /*skip_special_tokens=*/false), stops_(turn.request.stop) {
    protocol::OutputParserOptions opts;
    opts.starts_in_reasoning = turn.starts_in_reasoning;
    for (const auto& t : turn.request.tools) opts.tools.push_back({t.name, t.parameters_json});
    const std::string prefix = turn.request.dialect == Dialect::kAnthropic ? "toolu_" : "call_";
    const std::string salt = protocol::make_response_id(Dialect::kOpenAIChat).substr(9, 12);
    opts.id_generator = [prefix, salt](size_t i) { return prefix + salt + std::to_string(i); };
    parser_ = protocol::make_output_parser(parser_family(ctx.backend.info().family), opts).value();
  }

  std::vector<protocol::OutputEvent> push(int32_t token) {
    std::string text = stops_.push(decoder_.push(token));
    return text.empty() ? std::vector<protocol::OutputEvent>{} : parser_->feed(text);
  }
  std::vector<protocol::OutputEvent> finish() {
    std::vector<protocol::OutputEvent> out;
    if (!stops_.matched()) {
      std::string rest = stops_.push(decoder_.flush());
      rest += stops_.flush();
      if (!rest.empty()) out = parser_->feed(rest);
    }
    auto tail = parser_->finish();
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
  }
  bool stop_matched() const { return stops_.matched(); }
  const std::string& matched_stop() const { return stops_.matched_stop(); }
  const protocol::ParsedOutput& result() const { return parser_->result(); }

 private:
  protocol::IncrementalDecoder decoder_;
  StopMatcher stops_;
  std::unique_ptr<protocol::StreamParser> parser_;
};

protocol::FinishReason finish_reason(const GenerateResult& r, const OutputPipeline& out) {
  if (out.stop_matched()) return protocol::FinishReason::kStopSequence;
  if (r.finish == FinishCause::kLength) return protocol::FinishReason::kMaxTokens;
  if (!out.result().tool_calls.empty()) return protocol::FinishReason::kToolUse;
  return protocol::FinishReason::kEndTurn;
}

GenerateRequest generate_request(const ChatContext& ctx, const PreparedTurn& turn) {
  GenerateRequest g;
  g.prompt = turn.prompt;
  g.max_new_tokens = turn.request.max_tokens > 0 ? turn.request.max_tokens : ctx.options.default_max_tokens;
  if (ctx.options.max_output_tokens > 0) g.max_new_tokens = std::min(g.max_new_tokens, ctx.options.max_output_tokens);
  g.sampling = sampling_for(turn.request);
  g.stop_ids = ctx.backend.info().eos_ids;
  return g;
}

}  // namespace

std::string parser_family(const std::string& model_family) {
  if (model_family == "qwen3_5_moe") return "qwen3.5";
  return "qwen3";  // qwen3_moe, qwen3_next: hermes-style JSON tool calls (both Qwen forms accepted)
}

Result<PreparedTurn> prepare_turn(const ChatContext& ctx, Dialect dialect, const std::string& body, ApiError& error) {
  auto fail = [&](ApiErrorKind kind, std::string message, std::string param = "") -> Status {
    error = ApiError{kind, std::move(message), std::nullopt, std::move(param)};
    return invalid_argument(error.message);
  };
  Result<protocol::ChatRequest> parsed = dialect == Dialect::kAnthropic ? protocol::parse_anthropic_messages(body)
                                         : dialect == Dialect::kOpenAIChat ? protocol::parse_openai_chat(body)
                                                                           : protocol::parse_openai_responses(body);
  if (!parsed) return fail(ApiErrorKind::kInvalidRequest, parsed.status().message());
  PreparedTurn turn;
  turn.request = std::move(parsed).value();
  const auto& opts = ctx.options;
  bool known = turn.request.model == opts.model_id;
  for (const auto& a : opts.model_aliases) known = known || turn.request.model == a;
  if (!known)
    return fail(ApiErrorKind::kNotFound, "model '" + turn.request.model + "' not found; this server serves '" +
                                             opts.model_id + "'", "model");

  auto rendered = ctx.chat_template.render(protocol::to_template_json(turn.request));
  if (!rendered) return fail(ApiErrorKind::kInvalidRequest, "chat template: " + rendered.status().message());
  turn.prompt = ctx.tokenizer.encode(*rendered);
  const std::string& text = *rendered;
  turn.starts_in_reasoning = text.size() >= 8 && text.find("<think>", text.size() - 9) != std::string::npos;
  const int64_t context = ctx.backend.info().context_length;
  if (int64_t(turn.prompt.size()) >= context)
    return fail(ApiErrorKind::kInvalidRequest, "prompt is too long: " + std::to_string(turn.prompt.size()) +
                                                   " tokens > " + std::to_string(context - 1) + " maximum");
  return turn;
}

Result<std::string> run_turn(const ChatContext& ctx, const PreparedTurn& turn, ApiError& error) {
  OutputPipeline out(ctx, turn);
  auto result = ctx.backend.generate(generate_request(ctx, turn), [&](int32_t token) {
    out.push(token);
    return !out.stop_matched();
  });
  if (!result) {
    error = to_api_error(result.status());
    return result.status();
  }
  out.finish();
  protocol::Usage usage{result->prompt_tokens, result->cached_tokens, result->new_tokens};
  protocol::ResponseMeta meta{protocol::make_response_id(turn.request.dialect), turn.request.model, unix_now()};
  return protocol::full_response(turn.request.dialect, meta, out.result(), finish_reason(*result, out), usage,
                                 out.matched_stop());
}

void stream_turn(const ChatContext& ctx, const PreparedTurn& turn, const std::function<bool(const std::string&)>& write) {
  const Dialect d = turn.request.dialect;
  protocol::ResponseMeta meta{protocol::make_response_id(d), turn.request.model, unix_now()};
  auto enc = protocol::make_stream_encoder(d, meta, turn.request.include_usage);
  OutputPipeline out(ctx, turn);
  bool client_alive = write(enc->begin({int(turn.prompt.size()), 0, 0}));
  auto send_events = [&](const std::vector<protocol::OutputEvent>& events) {
    std::string frames;
    for (const auto& ev : events) frames += enc->event(ev);
    if (!frames.empty() && client_alive) client_alive = write(frames);
  };
  auto result = ctx.backend.generate(generate_request(ctx, turn), [&](int32_t token) {
    send_events(out.push(token));
    return client_alive && !out.stop_matched();
  });
  if (!client_alive) return;
  if (!result) {
    // Headers are gone already: the error travels as a stream event in the API's own shape.
    ApiError e = to_api_error(result.status());
    std::string body = protocol::error_body(d, e);
    write(d == Dialect::kAnthropic ? "event: error\ndata: " + body + "\n\n" : "data: " + body + "\n\n");
    return;
  }
  send_events(out.finish());
  protocol::Usage usage{result->prompt_tokens, result->cached_tokens, result->new_tokens};
  if (client_alive) write(enc->end(finish_reason(*result, out), usage, out.matched_stop()));
}

}  // namespace ft::proxy
