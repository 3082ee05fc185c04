#include "ft/engine/engine_server.h"

#include <httplib.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "ft/common/http_server.h"
#include "ft/common/log.h"
#include "ft/common/secret_compare.h"
#include "ft/engine/engine_status.h"
#include "ft/protocol/json_depth.h"

namespace ft::engine {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How often a generate stream with nothing to say sends a keepalive line.
constexpr auto kKeepalive = std::chrono::seconds(5);

int http_status(wire::ErrorCode code) {
  switch (code) {
    case wire::ErrorCode::kInvalidRequest:
    case wire::ErrorCode::kContextTooLong:
      return 400;
    case wire::ErrorCode::kRestoreMiss:
      return 409;
    case wire::ErrorCode::kOverloaded:
    case wire::ErrorCode::kUnavailable:
      return 503;
    case wire::ErrorCode::kInternal:
      return 500;
    case wire::ErrorCode::kUnauthorized:
      return 401;
  }
  return 500;
}

void send_error(httplib::Response& res, wire::ErrorCode code, const std::string& message) {
  res.status = http_status(code);
  res.set_content(to_json(wire::ErrorReply{code, message}).dump(), "application/json");
}

HttpLimits http_limits(const EngineServerOptions& o) {
  HttpLimits limits;
  limits.threads = o.http_threads;
  limits.max_queued_requests = o.max_queued_requests;
  limits.request_read_timeout_s = o.request_read_timeout_s;
  limits.refusal_body =
      to_json(wire::ErrorReply{wire::ErrorCode::kOverloaded, "every engine connection slot is busy; retry shortly"})
          .dump();
  return limits;
}

}  // namespace

struct EngineServer::Impl {
  EngineServerOptions options;
  Scheduler& scheduler;
  store::StateTier* store;
  ElasticGpuMemory* elastic;
  HttpServer http{http_limits(options)};
  std::thread thread;
  std::atomic<int> bound_port{0};

  Impl(EngineServerOptions o, Scheduler& s, store::StateTier* st, ElasticGpuMemory* e)
      : options(std::move(o)), scheduler(s), store(st), elastic(e) {}

  // Every POST names the protocol version it speaks; a mismatch is refused before anything runs.
  bool version_ok(const httplib::Request& req, httplib::Response& res) {
    const std::string v = req.get_header_value(wire::kVersionHeader);
    if (v == std::to_string(wire::kProtocolVersion)) return true;
    send_error(res, wire::ErrorCode::kInvalidRequest,
               std::string("this engine speaks ") + wire::kProtocolName + "; send " + wire::kVersionHeader + ": " +
                   std::to_string(wire::kProtocolVersion) + (v.empty() ? "" : " (got " + v + ")"));
    return false;
  }

  std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res) {
    if (!version_ok(req, res)) return std::nullopt;
    if (!protocol::json_depth_within(req.body)) {
      send_error(res, wire::ErrorCode::kInvalidRequest,
                 "body nests JSON deeper than " + std::to_string(protocol::kMaxJsonDepth) + " levels");
      return std::nullopt;
    }
    auto j = json::parse(req.body, nullptr, false);
    if (j.is_discarded()) {
      send_error(res, wire::ErrorCode::kInvalidRequest, "body is not valid JSON");
      return std::nullopt;
    }
    return j;
  }

  void generate(const httplib::Request& req, httplib::Response& res) {
    auto body = parse_body(req, res);
    if (!body) return;
    auto request = wire::generate_request_from_json(*body);
    if (!request) return send_error(res, wire::ErrorCode::kInvalidRequest, request.status().message());
    wire::ErrorReply refused;
    auto handle = scheduler.submit(std::move(request).value(), refused);
    if (!handle) {
      if (refused.code == wire::ErrorCode::kOverloaded) res.set_header("Retry-After", "1");
      return send_error(res, refused.code, refused.message);
    }
    std::shared_ptr<RequestHandle> h = std::move(handle).value();
    res.set_chunked_content_provider(
        "application/x-ndjson",
        [h](size_t, httplib::DataSink& sink) {
          auto last_write = Clock::now();
          for (;;) {
            auto e = h->next_until(Clock::now() + std::chrono::milliseconds(200));
            if (!e) {
              if (h->finished()) break;
              if (!sink.is_writable()) {  // the proxy went away: stop the work
                h->cancel();
                return false;
              }
              // A long prefill sends nothing for a while: a blank line now and then tells the proxy
              // the engine is alive (it gives up on an engine silent for longer than its timeout).
              if (Clock::now() - last_write >= kKeepalive) {
                if (!sink.write("\n", 1)) {
                  h->cancel();
                  return false;
                }
                last_write = Clock::now();
              }
              continue;
            }
            const std::string line = to_json(*e).dump() + "\n";
            if (!sink.is_writable() || !sink.write(line.data(), line.size())) {
              h->cancel();
              return false;
            }
            last_write = Clock::now();
          }
          sink.done();
          return true;
        },
        [h](bool success) {
          if (!success) h->cancel();
        });
  }

  // {"budget_bytes": N}: the expert cache resized so the model's GPU plan takes at most N bytes
  // (the new ceiling the elastic watcher grows back to); answers the placement after it.
  void gpu_memory(const httplib::Request& req, httplib::Response& res) {
    auto body = parse_body(req, res);
    if (!body) return;
    const json* n = body->is_object() && body->contains("budget_bytes") ? &(*body)["budget_bytes"] : nullptr;
    if (!n || !n->is_number() || n->get<double>() < 1 || n->get<double>() > 9.0e18)
      return send_error(res, wire::ErrorCode::kInvalidRequest,
                        "gpu-memory: field 'budget_bytes' (a positive number) is required");
    const auto bytes = std::uint64_t(n->get<double>());
    Result<PlacementPlan> plan = elastic ? elastic->set_ceiling(bytes) : scheduler.model().resize_gpu_memory(bytes);
    if (!plan) {
      const ErrorCode c = plan.status().code();
      const bool theirs = c == ErrorCode::kInvalidArgument || c == ErrorCode::kUnsupported;
      return send_error(res, theirs ? wire::ErrorCode::kInvalidRequest : wire::ErrorCode::kInternal,
                        plan.status().message());
    }
    res.set_content(json{{"placement", placement_json(scheduler.model(), elastic)}}.dump(), "application/json");
  }

  void routes() {
    if (!options.key.empty()) {
      http.set_pre_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
        const std::string auth = q.get_header_value("Authorization");
        if (auth.rfind("Bearer ", 0) == 0 && secrets_equal(std::string_view(auth).substr(7), options.key))
          return httplib::Server::HandlerResponse::Unhandled;
        send_error(r, wire::ErrorCode::kUnauthorized, "this engine needs its key (Authorization: Bearer ...)");
        r.set_header("Connection", "close");  // an unread body must not be taken for the next request
        return httplib::Server::HandlerResponse::Handled;
      });
    }
    http.set_payload_max_length(options.max_body_bytes);
    http.Get("/engine/v1/status", [this](const auto&, auto& r) {
      r.set_content(engine_status(scheduler, store, elastic).dump(), "application/json");
    });
    http.Post("/engine/v1/gpu-memory", [this](const auto& q, auto& r) { gpu_memory(q, r); });
    http.Get("/engine/v1/memory", [this](const auto&, auto& r) { r.set_content(engine_memory(store).dump(), "application/json"); });
    http.Post("/engine/v1/generate", [this](const auto& q, auto& r) { generate(q, r); });
    http.Post("/engine/v1/lookup", [this](const auto& q, auto& r) {
      auto body = parse_body(q, r);
      if (!body) return;
      auto l = wire::lookup_request_from_json(*body);
      if (!l) return send_error(r, wire::ErrorCode::kInvalidRequest, l.status().message());
      r.set_content(to_json(scheduler.lookup(*l)).dump(), "application/json");
    });
    http.Post("/engine/v1/cancel", [this](const auto& q, auto& r) {
      auto body = parse_body(q, r);
      if (!body) return;
      if (!body->is_object() || !(*body)["id"].is_string())
        return send_error(r, wire::ErrorCode::kInvalidRequest, "cancel: field 'id' (string) is required");
      scheduler.cancel((*body)["id"].template get<std::string>());
      r.set_content(R"({"ok":true})", "application/json");
    });
    http.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return;
      const int status = r.status;
      send_error(r, wire::ErrorCode::kInvalidRequest, "no route for " + q.method + " " + q.path);
      r.status = status;
    });
    http.set_exception_handler([](const httplib::Request& q, httplib::Response& r, std::exception_ptr) {
      FT_ERROR("unhandled exception serving " << q.path);
      send_error(r, wire::ErrorCode::kInternal, "internal error");
    });
  }
};

EngineServer::EngineServer(EngineServerOptions options, Scheduler& scheduler, store::StateTier* store,
                           ElasticGpuMemory* elastic)
    : impl_(std::make_unique<Impl>(std::move(options), scheduler, store, elastic)) {
  impl_->routes();
}

EngineServer::~EngineServer() { stop(); }

Status EngineServer::start() {
  FT_ASSIGN_OR_RETURN(const int port,
                      impl_->http.listen_in_background(impl_->options.host, impl_->options.port, impl_->thread));
  impl_->bound_port = port;
  return {};
}

int EngineServer::port() const { return impl_->bound_port.load(); }

void EngineServer::stop() {
  if (!impl_) return;
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace ft::engine
