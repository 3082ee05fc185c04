#include "chat_turn.h"

#include <atomic>
#include <chrono>
#include <random>

#include "ft/common/log.h"
#include "ft/protocol/client_responses.h"
#include "ft/protocol/output_parser.h"
#include "normalize.h"
#include "stop_matcher.h"

namespace ft::proxy {
namespace {

using protocol::ApiError;
using protocol::ApiErrorKind;
using protocol::Dialect;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

wire::Sampling sampling_for(const protocol::ChatRequest& r) {
  wire::Sampling p;
  p.temperature = float(r.sampling.temperature.value_or(1.0));
  p.top_p = float(r.sampling.top_p.value_or(1.0));
  p.top_k = r.sampling.top_k.value_or(0);
  p.min_p = float(r.sampling.min_p.value_or(0.0));
  p.seed = r.sampling.seed.value_or(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
  return p;
}

// Unique per process run and request: the engine names requests by it (cancel, logs).
std::string next_request_id() {
  static const uint64_t run = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  return std::to_string(run) + "-" + std::to_string(++counter);
}

enum class FinishCause { kStopToken, kLength, kStopped };  // kStopped: we stopped it (stop string, client gone)

struct GenerateResult {
  FinishCause finish = FinishCause::kLength;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int new_tokens = 0;
};

ApiError to_api_error(const Status& st) {
  ApiError e = protocol::api_error_from_status(st);
  if (st.code() == ErrorCode::kUnavailable) {
    // Queue full, or the engine restarting under `serve`: either way the client should retry.
    e.kind = st.message().rfind("overloaded", 0) == 0 ? ApiErrorKind::kOverloaded : ApiErrorKind::kUnavailable;
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
    parser_ = protocol::make_output_parser(parser_family(ctx.backend.info().family, ctx.chat_template.markers()), opts)
                  .value();
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

wire::GenerateRequest base_request(const ChatContext& ctx, const PreparedTurn& turn) {
  wire::GenerateRequest g;
  g.id = next_request_id();
  g.tenant = turn.tenant;
  g.max_new_tokens = turn.request.max_tokens > 0 ? turn.request.max_tokens : ctx.options.default_max_tokens;
  if (ctx.options.max_output_tokens > 0) g.max_new_tokens = std::min(g.max_new_tokens, ctx.options.max_output_tokens);
  g.sampling = sampling_for(turn.request);
  g.stop_ids = ctx.backend.info().eos_ids;
  return g;
}

// Reads the generation's events to the end, feeding tokens to `sink` (false: stop).
Result<GenerateResult> pump(LaunchedTurn& launched, const PreparedTurn& turn,
                            const std::function<bool(int32_t)>& sink) {
  GenerateResult out;
  out.prompt_tokens = int(turn.prompt.size());
  out.cached_tokens = int(launched.cached_tokens);
  while (auto e = launched.generation->next()) {
    switch (e->type) {
      case wire::Event::Type::kTokens:
        for (int32_t t : e->tokens) {
          ++out.new_tokens;
          if (!sink(t)) {
            launched.generation->cancel();
            out.finish = FinishCause::kStopped;
            return out;
          }
        }
        break;
      case wire::Event::Type::kDone:
        out.finish = e->finish == wire::Finish::kStop ? FinishCause::kStopToken
                     : e->finish == wire::Finish::kLength ? FinishCause::kLength
                                                          : FinishCause::kStopped;
        return out;
      case wire::Event::Type::kError:
        if (e->code == wire::ErrorCode::kOverloaded) return unavailable("overloaded: " + e->message);
        if (e->code == wire::ErrorCode::kUnavailable) return unavailable("engine: " + e->message);
        return internal_error("engine: " + e->message);
      case wire::Event::Type::kStarted:
      case wire::Event::Type::kCheckpoint:
        break;
    }
  }
  return internal_error("engine: the generation ended without a result");
}

}  // namespace

std::string parser_family(const std::string& model_family, std::span<const std::string> template_markers) {
  std::string family = protocol::output_parser_for(model_family, template_markers);
  return family.empty() ? "plain" : family;
}

Result<PreparedTurn> prepare_turn(const ChatContext& ctx, Dialect dialect, const std::string& body,
                                  const std::string& tenant, ApiError& error, bool find_boundaries) {
  auto fail = [&](ApiErrorKind kind, std::string message, std::string param = "") -> Status {
    error = ApiError{kind, std::move(message), std::nullopt, std::move(param)};
    return invalid_argument(error.message);
  };
  // Normalise on the JSON; a body that is not JSON goes to the parser as is for its error.
  std::string normalized;
  auto j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (!j.is_discarded() && !normalize_request(dialect, j).empty()) normalized = j.dump();
  const std::string& text_in = normalized.empty() ? body : normalized;
  Result<protocol::ChatRequest> parsed = dialect == Dialect::kAnthropic    ? protocol::parse_anthropic_messages(text_in)
                                         : dialect == Dialect::kOpenAIChat ? protocol::parse_openai_chat(text_in)
                                                                           : protocol::parse_openai_responses(text_in);
  if (!parsed) return fail(ApiErrorKind::kInvalidRequest, parsed.status().message());
  PreparedTurn turn;
  turn.request = std::move(parsed).value();
  turn.tenant = tenant;
  if (!ctx.names.serves(turn.request.model))
    return fail(ApiErrorKind::kNotFound, "model '" + turn.request.model + "' not found; this server serves '" +
                                             ctx.options.model_id + "'", "model");

  const std::string conversation = protocol::to_template_json(turn.request);
  protocol::ChatRenderOptions render_options;
  if (ctx.options.boundary_work_limit > 0) render_options.boundary_work_limit = ctx.options.boundary_work_limit;
  auto text = ctx.chat_template.render(conversation, render_options);
  if (!text) return fail(ApiErrorKind::kInvalidRequest, "chat template: " + text.status().message());
  std::vector<protocol::TokenCut> cuts;
  turn.prompt = ctx.tokenizer.encode_with_cuts(*text, cuts);
  turn.starts_in_reasoning = text->size() >= 8 && text->find("<think>", text->size() - 9) != std::string::npos;
  const int64_t context = ctx.backend.info().context_length;
  if (int64_t(turn.prompt.size()) >= context)
    return fail(ApiErrorKind::kInvalidRequest, "prompt is too long: " + std::to_string(turn.prompt.size()) +
                                                   " tokens > " + std::to_string(context - 1) + " maximum");
  if (!find_boundaries) return turn;

  auto rendered = ctx.chat_template.find_boundaries(conversation, std::move(text).value(), render_options);
  if (!rendered) return fail(ApiErrorKind::kInvalidRequest, "chat template: " + rendered.status().message());
  protocol::tokenize_boundaries(*rendered, ctx.chat_template, ctx.tokenizer, turn.prompt, cuts);
  for (const auto& b : rendered->boundaries)
    if (b.token_index && (turn.boundaries.empty() || *b.token_index > turn.boundaries.back()))
      turn.boundaries.push_back(*b.token_index);
  turn.boundaries_skipped = rendered->boundaries_skipped;
  return turn;
}

Result<PreparedTurn> prepare_count_tokens(const ChatContext& ctx, const std::string& body, const std::string& tenant,
                                          ApiError& error) {
  auto j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (j.is_object() && !j.contains("max_tokens")) j["max_tokens"] = 1;
  // Counting needs no boundaries: none are searched.
  return prepare_turn(ctx, Dialect::kAnthropic, j.is_discarded() ? body : j.dump(), tenant, error,
                      /*find_boundaries=*/false);
}

Result<LaunchedTurn> launch_turn(const ChatContext& ctx, const PreparedTurn& turn, ApiError& error) {
  const std::size_t n = turn.prompt.size();
  std::vector<PrefixCut> cuts;
  if (ctx.options.prefix_cache) cuts = prefix_cuts(ctx.backend.info().fingerprint, turn.prompt, turn.boundaries);

  // The deepest cut the engine holds: restore it, compute from there (start = 0: nothing held).
  std::size_t start = 0;
  std::optional<PrefixKey> restore;
  if (auto keys = lookup_keys(cuts, n); !keys.empty()) {
    auto reply = ctx.backend.lookup({turn.tenant, keys});
    if (reply && reply->index && *reply->index < keys.size()) {
      for (const PrefixCut& c : cuts) {
        if (c.key != keys[*reply->index]) continue;
        restore = c.key;
        start = c.tokens;
      }
    }
  }
  for (;;) {
    wire::GenerateRequest g = base_request(ctx, turn);
    if (restore) g.restore = wire::RestorePoint{*restore, int64_t(start)};
    g.tokens.assign(turn.prompt.begin() + std::ptrdiff_t(start), turn.prompt.end());
    g.snapshots = plan_snapshots(cuts, start, n, ctx.options.checkpoints);
    std::vector<PrefixKey> pinned;
    for (const auto& s : g.snapshots)
      if (s.pin) pinned.push_back(s.key);
    g.unpin = ctx.pins.update(turn.tenant, restore, pinned);

    auto gen = ctx.backend.start(g);
    if (!gen) {
      error = to_api_error(gen.status());
      return gen.status();
    }
    auto first = (*gen)->next();
    if (first && first->type == wire::Event::Type::kStarted) return LaunchedTurn{std::move(gen).value(), first->restored};
    if (first && first->type == wire::Event::Type::kError && first->code == wire::ErrorCode::kRestoreMiss && restore) {
      FT_WARN("restore of " << restore->to_hex() << " failed (" << first->message << "); computing the prompt in full");
      restore.reset();  // evicted or failed its checksum since the lookup: compute it all
      start = 0;
      continue;
    }
    // An engine lost between admitting the request and starting it (killed, restarting, silent)
    // is as retryable as one that refused it: the client has received nothing yet.
    const std::string what = first ? first->message : std::string("no answer");
    const bool failed = first && first->type == wire::Event::Type::kError;
    Status st = internal_error("engine: " + what);
    if (!first || (failed && first->code == wire::ErrorCode::kUnavailable)) st = unavailable("engine: " + what);
    if (failed && first->code == wire::ErrorCode::kOverloaded) st = unavailable("overloaded: " + what);
    error = to_api_error(st);
    return st;
  }
}

Result<std::string> run_turn(const ChatContext& ctx, const PreparedTurn& turn, LaunchedTurn launched,
                             ApiError& error, std::string* text_out) {
  OutputPipeline out(ctx, turn);
  auto result = pump(launched, turn, [&](int32_t token) {
    out.push(token);
    return !out.stop_matched();
  });
  if (!result) {
    error = to_api_error(result.status());
    return result.status();
  }
  out.finish();
  if (text_out) *text_out = out.result().text;
  protocol::Usage usage{result->prompt_tokens, result->cached_tokens, result->new_tokens};
  protocol::ResponseMeta meta{protocol::make_response_id(turn.request.dialect), turn.request.model, unix_now()};
  return protocol::full_response(turn.request.dialect, meta, out.result(), finish_reason(*result, out), usage,
                                 out.matched_stop());
}

void stream_turn(const ChatContext& ctx, const PreparedTurn& turn, LaunchedTurn launched,
                 const std::function<bool(const std::string&)>& write, std::string* text_out) {
  const Dialect d = turn.request.dialect;
  protocol::ResponseMeta meta{protocol::make_response_id(d), turn.request.model, unix_now()};
  auto enc = protocol::make_stream_encoder(d, meta, turn.request.include_usage);
  OutputPipeline out(ctx, turn);
  bool client_alive = write(enc->begin({int(turn.prompt.size()), int(launched.cached_tokens), 0}));
  auto send_events = [&](const std::vector<protocol::OutputEvent>& events) {
    std::string frames;
    for (const auto& ev : events) frames += enc->event(ev);
    if (!frames.empty() && client_alive) client_alive = write(frames);
  };
  auto result = pump(launched, turn, [&](int32_t token) {
    send_events(out.push(token));
    return client_alive && !out.stop_matched();
  });
  if (!client_alive) return;
  if (!result) {
    // Headers are gone already: the error travels as a stream event in the API's own shape. An
    // engine lost mid-stream is worth a retry, but the 503 that would say so cannot be sent now:
    // it goes as the API's overloaded error (Anthropic's overloaded_error, OpenAI's rate-limit
    // type), the error a client retries after a pause.
    ApiError e = to_api_error(result.status());
    if (e.kind == ApiErrorKind::kUnavailable) e.kind = ApiErrorKind::kOverloaded;
    std::string body = protocol::error_body(d, e);
    write(d == Dialect::kAnthropic ? "event: error\ndata: " + body + "\n\n" : "data: " + body + "\n\n");
    return;
  }
  send_events(out.finish());
  if (text_out) *text_out = out.result().text;
  protocol::Usage usage{result->prompt_tokens, result->cached_tokens, result->new_tokens};
  if (client_alive) write(enc->end(finish_reason(*result, out), usage, out.matched_stop()));
}

}  // namespace ft::proxy
