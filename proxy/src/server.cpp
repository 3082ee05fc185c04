// HTTP routes over cpp-httplib. Handlers translate between HTTP and chat_turn; nothing here
// knows a model.
#include "ft/proxy/server.h"

#include <httplib.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "chat_turn.h"
#include "client_activity.h"
#include "dashboard.h"
#include "ft/common/http_server.h"
#include "ft/common/log.h"
#include "ft/common/loopback.h"
#include "ft/common/private_dir.h"
#include "ft/common/secret_compare.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/json_depth.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/sharing_scope.h"
#include "request_guard.h"

namespace ft::proxy {

using protocol::ApiError;
using protocol::ApiErrorKind;
using protocol::Dialect;

namespace {

// The API key a request presents: x-api-key, else a Bearer token ("" for none).
std::string presented_key(const httplib::Request& req) {
  std::string key = req.get_header_value("x-api-key");
  const std::string auth = req.get_header_value("Authorization");
  if (key.empty() && auth.rfind("Bearer ", 0) == 0) key = auth.substr(7);
  return key;
}

HttpLimits http_limits(const ServerOptions& o) {
  HttpLimits limits;
  limits.threads = o.http_threads;
  limits.max_queued_requests = o.max_queued_requests;
  limits.request_read_timeout_s = o.request_read_timeout_s;
  // Sent before the request is read, so its API is unknown: Anthropic's error shape, whose
  // error.message OpenAI's SDKs read too. Both retry a 503 after its Retry-After.
  limits.refusal_body = protocol::error_body(
      Dialect::kAnthropic, {ApiErrorKind::kOverloaded, "every connection slot is busy; retry shortly", 1, ""});
  return limits;
}

}  // namespace

struct Server::Impl {
  ServerOptions options;
  std::unique_ptr<GenerationBackend> backend;
  protocol::Tokenizer tokenizer;
  protocol::ChatTemplate chat_template;
  HttpServer http{http_limits(options)};
  std::thread thread;
  std::atomic<int> bound_port{0};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  // Counters for /metrics and /v1/stats.
  std::atomic<uint64_t> requests_total{0}, errors_total{0}, streams_active{0}, streams_total{0};
  std::atomic<uint64_t> boundaries_skipped_total{0};  // left out for lack of preparation budget
  ClientActivity clients;  // per tenant and agent, for /v1/stats (the dashboard's clients table)

  PinLedger pins;
  ModelNames names{options};
  std::atomic<uint64_t> capture_seq{0};
  std::mutex capture_mu;
  std::atomic<bool> capture_refused{false};  // warned once that the capture dir is not ours

  Impl(ServerOptions o, std::unique_ptr<GenerationBackend> b, protocol::Tokenizer t, protocol::ChatTemplate c)
      : options(std::move(o)), backend(std::move(b)), tokenizer(std::move(t)), chat_template(std::move(c)),
        pins(options.checkpoints.max_pins_per_tenant) {}

  ChatContext context() { return ChatContext{options, *backend, tokenizer, chat_template, pins, names}; }

  // One exchange as a replay fixture (see ServerOptions::capture_dir).
  void capture(const httplib::Request& req, int status, const std::string& text) {
    if (options.capture_dir.empty()) return;
    nlohmann::ordered_json j;
    j["method"] = req.method;
    j["path"] = req.path;
    j["status"] = status;
    nlohmann::ordered_json headers = nlohmann::ordered_json::object();
    for (const auto& [k, v] : req.headers)
      if (k != "x-api-key" && k != "Authorization" && k.rfind("REMOTE_", 0) != 0 && k.rfind("LOCAL_", 0) != 0)
        headers[k] = v;
    j["headers"] = headers;
    auto body = nlohmann::ordered_json::parse(req.body, nullptr, false);
    j["request"] = body.is_discarded() ? nlohmann::ordered_json(req.body) : body;
    j["response_text"] = text;
    char name[32];
    std::snprintf(name, sizeof name, "%06llu.json", static_cast<unsigned long long>(++capture_seq));
    std::lock_guard lock(capture_mu);
    // Captures hold whole prompts: owner-only like the store.
    if (const Status st = make_private_dir(options.capture_dir); !st) {
      if (!capture_refused.exchange(true)) FT_WARN("not capturing requests: " << st.message());
      return;
    }
    std::ofstream(options.capture_dir / name) << j.dump(1) << "\n";
  }

  void send_error(httplib::Response& res, Dialect d, const ApiError& e) {
    ++errors_total;
    res.status = protocol::http_status(d, e.kind);
    if (e.retry_after_s) res.set_header("Retry-After", std::to_string(*e.retry_after_s));
    res.set_content(protocol::error_body(d, e), "application/json");
  }

  // The tenant a request belongs to, or nothing when its key is refused. Named keys (api_keys)
  // give their tenant's name; otherwise the tenant is a hash of the presented key (keys never
  // reach the store), "anonymous" without one. Keys are compared in constant time, every one of
  // the named keys each time.
  std::optional<std::string> caller(const httplib::Request& req) const {
    const std::string key = presented_key(req);
    if (!options.api_keys.empty()) {
      const ServerOptions::NamedKey* match = nullptr;
      for (const ServerOptions::NamedKey& k : options.api_keys)
        if (secrets_equal(key, k.key) && !match) match = &k;
      if (!match) return std::nullopt;
      return "tenant:" + match->tenant;
    }
    if (!options.api_key.empty() && !secrets_equal(key, options.api_key)) return std::nullopt;
    if (key.empty()) return std::string("anonymous");
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
    return std::string("key-") + hex;
  }
  bool authorised(const httplib::Request& req) const { return caller(req).has_value(); }
  std::string tenant_of(const httplib::Request& req) const { return caller(req).value_or("anonymous"); }
  // Where a request's checkpoints are saved and looked up: its tenant's namespace, narrowed by a
  // sharing scope when the request names one (sharing_scope.h); nullopt with `error` set for a
  // malformed scope.
  std::optional<std::string> checkpoint_namespace(const httplib::Request& req, ApiError& error) const {
    const std::string tenant = tenant_of(req);
    if (!req.has_header(kScopeHeader)) return tenant;
    const std::string scope = req.get_header_value(kScopeHeader);
    if (!valid_scope(scope)) {
      error = {ApiErrorKind::kInvalidRequest, scope_rule(), std::nullopt, ""};
      return std::nullopt;
    }
    return scoped_namespace(tenant, scope);
  }
  // GET routes that disclose what the server holds (stats, metrics) need the key as the POSTs do.
  bool admit_get(const httplib::Request& req, httplib::Response& res) {
    if (authorised(req)) return true;
    send_error(res, Dialect::kOpenAIChat, {ApiErrorKind::kAuthentication, "invalid API key", std::nullopt, ""});
    return false;
  }

  // {"budget_bytes": N}: the engine's expert cache resized to a GPU memory budget (`freetoken ctl
  // memory --gpu-mem`). A setting of the whole server: with named tenants no caller may change it.
  void gpu_memory(const httplib::Request& q, httplib::Response& r) {
    constexpr Dialect d = Dialect::kOpenAIChat;
    if (!admit(q, r, d)) return;
    if (!options.api_keys.empty()) {
      return send_error(r, d,
                        {ApiErrorKind::kPermission,
                         "GPU memory is a setting of the whole server, not of a tenant: set it with serve's "
                         "--gpu-mem",
                         std::nullopt, ""});
    }
    const auto body = nlohmann::json::parse(q.body, nullptr, false);
    const nlohmann::json* n = body.is_object() && body.contains("budget_bytes") ? &body["budget_bytes"] : nullptr;
    if (!n || !n->is_number() || n->get<double>() < 1 || n->get<double>() > 9.0e18)
      return send_error(r, d,
                        {ApiErrorKind::kInvalidRequest, "field 'budget_bytes' (a positive number) is required",
                         std::nullopt, "budget_bytes"});
    Result<nlohmann::json> done = backend->resize_gpu_memory(std::uint64_t(n->get<double>()));
    if (!done) {
      const bool theirs = done.status().code() == ErrorCode::kInvalidArgument;
      return send_error(r, d,
                        {theirs ? ApiErrorKind::kInvalidRequest : ApiErrorKind::kUnavailable, done.status().message(),
                         theirs ? std::nullopt : std::optional<int>(1), ""});
    }
    r.set_content(done->dump(), "application/json");
  }

  // Shared front of every POST: auth and size checks in the caller's dialect.
  bool admit(const httplib::Request& req, httplib::Response& res, Dialect d) {
    ++requests_total;
    if (!authorised(req)) {
      send_error(res, d, {ApiErrorKind::kAuthentication, "invalid API key", std::nullopt, ""});
      return false;
    }
    if (req.body.size() > options.max_body_bytes) {
      send_error(res, d, {ApiErrorKind::kRequestTooLarge,
                          "request body is " + std::to_string(req.body.size()) + " bytes; the limit is " +
                              std::to_string(options.max_body_bytes),
                          std::nullopt, ""});
      return false;
    }
    if (!protocol::json_depth_within(req.body)) {
      send_error(res, d, {ApiErrorKind::kInvalidRequest,
                          "request body nests JSON deeper than " + std::to_string(protocol::kMaxJsonDepth) + " levels",
                          std::nullopt, ""});
      return false;
    }
    return true;
  }

  void chat(const httplib::Request& req, httplib::Response& res, Dialect d) {
    if (!admit(req, res, d)) return capture(req, res.status > 0 ? res.status : 200, "");
    const std::string tenant = tenant_of(req);
    // Shared: a streaming request stays in flight until its stream ends, after this handler.
    auto activity = std::make_shared<ClientActivity::Request>(
        clients.begin(tenant, agent_name(req.get_header_value("User-Agent"))));
    ApiError error;
    const std::optional<std::string> space = checkpoint_namespace(req, error);
    auto turn =
        space ? prepare_turn(context(), d, req.body, *space, error) : Result<PreparedTurn>(invalid_argument(""));
    if (!turn) {
      activity->failed();
      send_error(res, d, error);
      return capture(req, res.status > 0 ? res.status : 200, "");
    }
    boundaries_skipped_total += turn->boundaries_skipped;
    // Admission and restore happen before any byte is sent, so an overloaded or failed engine
    // still gets its proper HTTP status even on a streaming request.
    auto launched = launch_turn(context(), *turn, error);
    if (!launched) {
      activity->failed();
      send_error(res, d, error);
      return capture(req, res.status > 0 ? res.status : 200, "");
    }
    activity->tokens(turn->prompt.size(), std::size_t(launched->cached_tokens));
    if (!turn->request.stream) {
      std::string text;
      auto body = run_turn(context(), *turn, std::move(launched).value(), error, &text);
      if (!body) {
        activity->failed();
        send_error(res, d, error);
      } else {
        res.set_content(*body, "application/json");
      }
      return capture(req, res.status > 0 ? res.status : 200, text);
    }
    auto shared_turn = std::make_shared<PreparedTurn>(std::move(turn).value());
    auto shared_launch = std::make_shared<LaunchedTurn>(std::move(launched).value());
    res.set_header("Cache-Control", "no-cache");
    // The request outlives this handler only for --capture; do not copy every body otherwise.
    auto captured = options.capture_dir.empty() ? nullptr : std::make_shared<const httplib::Request>(req);
    res.set_chunked_content_provider("text/event-stream", [this, captured, shared_turn, shared_launch, activity](
                                                              size_t, httplib::DataSink& sink) {
      ++streams_active;
      ++streams_total;
      std::string text;
      stream_turn(context(), *shared_turn, std::move(*shared_launch), [&sink](const std::string& frames) {
        if (!sink.is_writable()) return false;
        return sink.write(frames.data(), frames.size());
      }, &text);
      --streams_active;
      sink.done();
      if (captured) capture(*captured, 200, text);
      return true;
    });
  }

  void count_tokens(const httplib::Request& req, httplib::Response& res) {
    if (!admit(req, res, Dialect::kAnthropic)) return;
    ApiError error;
    auto turn = prepare_count_tokens(context(), req.body, tenant_of(req), error);
    if (!turn) return send_error(res, Dialect::kAnthropic, error);
    res.set_content(nlohmann::json{{"input_tokens", turn->prompt.size()}}.dump(), "application/json");
  }

  void models(httplib::Response& res) {
    const int64_t created = 0;
    nlohmann::json data = nlohmann::json::array();
    for (const std::string& id : [&] {
           std::vector<std::string> ids{options.model_id};
           for (const std::string& a : options.model_aliases)  // the exact names, not the patterns
             if (a.find_first_of("*?") == std::string::npos) ids.push_back(a);
           return ids;
         }()) {
      // One list both SDK families read: OpenAI's {object, owned_by}, Anthropic's {type, display_name}.
      data.push_back({{"id", id}, {"object", "model"}, {"type", "model"}, {"created", created},
                      {"created_at", "1970-01-01T00:00:00Z"}, {"display_name", id}, {"owned_by", "freetoken"}});
    }
    nlohmann::json body = {{"object", "list"}, {"data", data}, {"has_more", false},
                           {"first_id", options.model_id}, {"last_id", data.back()["id"]}};
    res.set_content(body.dump(), "application/json");
  }

  // `tenant`: show only this tenant's clients and checkpoints (see the /v1/stats route).
  nlohmann::json stats_json(const std::optional<std::string>& tenant) {
    nlohmann::json engine = backend->status();
    nlohmann::json memory = backend->memory();
    if (tenant && memory.contains("checkpoints") && memory["checkpoints"].contains("tenants")) {
      nlohmann::json own = nlohmann::json::array();
      for (const auto& t : memory["checkpoints"]["tenants"])
        if (in_tenant(t.value("tenant", ""), *tenant)) own.push_back(t);
      memory["checkpoints"]["tenants"] = own;
    }
    return {{"model", options.model_id},
            {"uptime_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
            {"requests_total", requests_total.load()},
            {"errors_total", errors_total.load()},
            {"streams_active", streams_active.load()},
            {"boundaries_skipped_total", boundaries_skipped_total.load()},
            {"prefix_cache", options.prefix_cache},
            {"engine", engine},
            {"memory", memory},
            {"clients", clients.to_json(tenant)}};
  }

  std::string metrics_text() {
    const nlohmann::json e = backend->status();
    const nlohmann::json sched = e.value("scheduler", nlohmann::json::object());
    auto num = [&](const char* k) { return sched.value(k, 0.0); };
    std::string out;
    auto metric = [&out](const char* name, const char* type, const char* help, double v) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
             std::to_string(v) + "\n";
    };
    metric("freetoken_requests_total", "counter", "HTTP API requests received", double(requests_total.load()));
    metric("freetoken_errors_total", "counter", "requests answered with an error", double(errors_total.load()));
    metric("freetoken_streams_active", "gauge", "streaming responses in progress", double(streams_active.load()));
    metric("freetoken_connections_refused_total", "counter",
           "connections answered 503 at once: every HTTP worker busy and the queue full", double(http.refused_total()));
    metric("freetoken_request_read_timeouts_total", "counter",
           "requests answered 408: headers and body did not arrive within --request-read-timeout",
           double(http.read_timeouts_total()));
    metric("freetoken_boundaries_skipped_total", "counter",
           "semantic boundaries left out for lack of preparation budget (the oldest of a conversation)",
           double(boundaries_skipped_total.load()));
    metric("freetoken_engine_up", "gauge", "1 when the engine answers", e.contains("error") ? 0.0 : 1.0);
    metric("freetoken_prompt_tokens_total", "counter", "prompt tokens received", num("prompt_tokens"));
    metric("freetoken_cached_tokens_total", "counter", "prompt tokens restored from checkpoints", num("cached_tokens"));
    metric("freetoken_generated_tokens_total", "counter", "tokens generated", num("generated_tokens"));
    metric("freetoken_prefill_seconds_total", "counter", "time in forward passes holding prefill rows", num("prefill_seconds"));
    metric("freetoken_decode_seconds_total", "counter", "time in decode-only forward passes", num("decode_seconds"));
    metric("freetoken_engine_steps_total", "counter", "forward passes", num("steps"));
    metric("freetoken_engine_batched_steps_total", "counter", "forward passes over 2+ sequences", num("batched_steps"));
    metric("freetoken_checkpoints_saved_total", "counter", "model-state checkpoints saved", num("checkpoints_saved"));
    metric("freetoken_restores_total", "counter", "checkpoints restored", num("restores"));
    metric("freetoken_engine_running", "gauge", "sequences running", num("running"));
    metric("freetoken_engine_waiting", "gauge", "sequences waiting for a slot", num("waiting"));
    // Routed experts in host RAM: the GPU expert cache and how its misses were served.
    const nlohmann::json x = e.value("placement", nlohmann::json::object()).value("experts", nlohmann::json::object());
    if (x.contains("stats")) {
      const nlohmann::json& st = x["stats"];
      auto xnum = [&](const char* k) { return st.value(k, 0.0); };
      metric("freetoken_expert_cache_slots", "gauge", "GPU expert cache slots", x.value("slots", 0.0));
      metric("freetoken_expert_hits_total", "counter", "routed-expert uses found in the GPU cache", xnum("hits"));
      metric("freetoken_expert_misses_total", "counter", "routed-expert uses missing from the GPU cache",
             xnum("misses"));
      metric("freetoken_expert_fetched_total", "counter", "missed experts copied to the GPU", xnum("fetched"));
      metric("freetoken_expert_cpu_total", "counter", "missed experts computed on the CPU", xnum("cpu_computed"));
      metric("freetoken_expert_read_in_place_total", "counter", "missed experts the GPU read from host memory",
             xnum("read_in_place"));
      metric("freetoken_expert_fetched_bytes_total", "counter", "bytes of experts copied over PCIe",
             xnum("fetched_bytes"));
      metric("freetoken_expert_cpu_bytes_total", "counter", "bytes of experts read by the CPU", xnum("cpu_bytes"));
      metric("freetoken_expert_fetch_gbps", "gauge", "PCIe rate while copying experts, GB/s", xnum("fetch_gbps"));
      metric("freetoken_expert_cpu_gbps", "gauge", "CPU expert rate while computing, GB/s", xnum("cpu_gbps"));
      const nlohmann::json rates = st.value("layer_hit_rate", nlohmann::json::array());
      out +=
          "# HELP freetoken_expert_layer_hit_rate GPU expert cache hit rate per MoE layer\n"
          "# TYPE freetoken_expert_layer_hit_rate gauge\n";
      for (std::size_t i = 0; i < rates.size(); ++i)
        out += "freetoken_expert_layer_hit_rate{layer=\"" + std::to_string(i) + "\"} " +
               std::to_string(rates[i].get<double>()) + "\n";
    }
    return out;
  }

  void routes() {
    // Bodies past the limit are still read so the error can be sent in the API's format.
    http.set_payload_max_length(options.max_body_bytes * 4);
    // Refusals that must come before the body is read (request_guard.h).
    const bool loopback_only = loopback_host(options.host);
    http.set_pre_routing_handler([this, loopback_only](const httplib::Request& q, httplib::Response& r) {
      const auto refusal = refuse_early(q, loopback_only);
      if (!refusal) return httplib::Server::HandlerResponse::Unhandled;
      ++requests_total;
      const Dialect d = q.path.rfind("/v1/messages", 0) == 0 ? Dialect::kAnthropic : Dialect::kOpenAIChat;
      send_error(r, d, {refusal->status == 403 ? ApiErrorKind::kPermission : ApiErrorKind::kInvalidRequest,
                        refusal->message, std::nullopt, ""});
      r.status = refusal->status;
      r.set_header("Connection", "close");  // an unread body must not be taken for the next request
      return httplib::Server::HandlerResponse::Handled;
    });
    http.Post("/v1/messages", [this](const auto& q, auto& r) { chat(q, r, Dialect::kAnthropic); });
    http.Post("/v1/messages/count_tokens", [this](const auto& q, auto& r) { count_tokens(q, r); });
    http.Post("/v1/chat/completions", [this](const auto& q, auto& r) { chat(q, r, Dialect::kOpenAIChat); });
    http.Post("/v1/responses", [this](const auto& q, auto& r) { chat(q, r, Dialect::kOpenAIResponses); });
    http.Get("/v1/models", [this](const auto&, auto& r) { models(r); });
    // Liveness of the whole pair: 503 while the engine does not answer (restarting, hung), so a
    // probe or `freetoken launch` does not send work to a server that cannot do it.
    http.Get("/health", [this](const auto&, auto& r) {
      const nlohmann::json engine = backend->status();
      if (engine.contains("error")) {
        r.status = 503;
        r.set_header("Retry-After", "1");
        r.set_content(nlohmann::json{{"status", "unavailable"}, {"reason", engine["error"]}}.dump(), "application/json");
        return;
      }
      r.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/v1/stats", [this](const auto& q, auto& r) {
      if (!admit_get(q, r)) return;
      // With named keys (api_keys) each caller sees only its own tenant's rows: tenants do not
      // learn of each other's activity.
      const std::optional<std::string> tenant = options.api_keys.empty() ? std::nullopt : caller(q);
      r.set_header("Cache-Control", "no-store");
      r.set_content(stats_json(tenant).dump(), "application/json");
    });
    http.Post("/v1/gpu-memory", [this](const auto& q, auto& r) { gpu_memory(q, r); });
    add_dashboard_routes(http);
    http.Get("/metrics", [this](const auto& q, auto& r) {
      if (admit_get(q, r)) r.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    http.set_error_handler([this](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return;
      const Dialect d = q.path.rfind("/v1/messages", 0) == 0 ? Dialect::kAnthropic : Dialect::kOpenAIChat;
      ApiErrorKind kind = r.status == 404 ? ApiErrorKind::kNotFound
                          : r.status == 413 ? ApiErrorKind::kRequestTooLarge
                                            : ApiErrorKind::kInvalidRequest;
      const int status = r.status;
      send_error(r, d, {kind, "no route for " + q.method + " " + q.path, std::nullopt, ""});
      if (status == 413 || status == 404 || status == 405) r.status = status;
    });
    http.set_exception_handler([this](const httplib::Request& q, httplib::Response& r, std::exception_ptr) {
      const Dialect d = q.path.rfind("/v1/messages", 0) == 0 ? Dialect::kAnthropic : Dialect::kOpenAIChat;
      FT_ERROR("unhandled exception serving " << q.path);
      send_error(r, d, {ApiErrorKind::kInternal, "internal error", std::nullopt, ""});
    });
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::create(ServerOptions options, std::unique_ptr<GenerationBackend> backend,
                                               protocol::Tokenizer tokenizer, protocol::ChatTemplate chat_template) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(backend), std::move(tokenizer), std::move(chat_template));
  impl->routes();
  return std::unique_ptr<Server>(new Server(std::move(impl)));  // private constructor
}

Status Server::start() {
  FT_ASSIGN_OR_RETURN(const int port,
                      impl_->http.listen_in_background(impl_->options.host, impl_->options.port, impl_->thread));
  impl_->bound_port = port;
  return {};
}

int Server::port() const { return impl_->bound_port.load(); }

void Server::wait() {
  if (impl_->thread.joinable()) impl_->thread.join();
}

void Server::stop() {
  if (!impl_) return;
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace ft::proxy
