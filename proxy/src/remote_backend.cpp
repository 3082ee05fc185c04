// The engine process over loopback HTTP (protocol/ENGINE-PROTOCOL.md). A generation is one POST
// whose NDJSON body is read on a thread of its own and queued as events; closing the connection
// is how the proxy cancels (the engine notices the write fail and stops the sequence).
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ft/engine/scheduler.h"
#include "ft/proxy/backend.h"

namespace ft::proxy {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The protocol version, and the engine's key when it has one.
httplib::Headers protocol_headers(const std::string& key) {
  httplib::Headers h = {{wire::kVersionHeader, std::to_string(wire::kProtocolVersion)}};
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  return h;
}

Status engine_unavailable(const std::string& why) { return unavailable("engine unavailable: " + why); }

// An error reply from the engine as the Status the proxy maps to the client's error.
Status status_from_reply(int http_status, const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  auto reply = j.is_discarded() ? Result<wire::ErrorReply>(internal_error("bad reply"))
                                : wire::error_reply_from_json(j);
  if (!reply) return internal_error("engine answered HTTP " + std::to_string(http_status));
  return wire::to_status(*reply);
}

class RemoteGeneration final : public Generation {
 public:
  RemoteGeneration(std::string host, int port, std::string key, std::string id, std::string body, int stall_s)
      : host_(std::move(host)), port_(port), key_(std::move(key)), id_(std::move(id)), stall_s_(stall_s) {
    thread_ = std::thread([this, body = std::move(body)] { run(host_, port_, body); });
  }
  ~RemoteGeneration() override {
    cancel();
    thread_.join();
  }

  // Blocks until the engine answered the POST: OK when it streams, else its error.
  Status admitted() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return headers_seen_ || ended_; });
    if (headers_seen_ && http_status_ == 200) return Status::ok();
    cv_.wait(lock, [&] { return ended_; });
    if (http_status_ == 0) return engine_unavailable(transport_error_);
    return status_from_reply(http_status_, error_body_);
  }

  std::optional<wire::Event> next() override { return events_.next(); }
  // Closing the stream cancels too, but only when the next line arrives; a long prefill sends
  // nothing, so say it explicitly.
  void cancel() override {
    if (cancelled_.exchange(true)) return;
    {
      std::lock_guard lock(mu_);
      if (ended_) return;
    }
    httplib::Client c(host_, port_);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(2, 0);
    c.Post("/engine/v1/cancel", protocol_headers(key_), json{{"id", id_}}.dump(), "application/json");
  }

 private:
  void run(const std::string& host, int port, const std::string& body) {
    httplib::Client client(host, port);
    client.set_connection_timeout(5, 0);
    // The engine writes a keepalive line every few seconds while it has nothing to say (a long
    // prefill): silence longer than this means it hangs, and the request fails to be retried.
    client.set_read_timeout(stall_s_, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/engine/v1/generate";
    req.headers = protocol_headers(key_);
    req.body = body;
    req.set_header("Content-Type", "application/json");
    std::string pending;
    bool saw_end = false;
    req.response_handler = [&](const httplib::Response& r) {
      std::lock_guard lock(mu_);
      http_status_ = r.status;
      headers_seen_ = true;
      cv_.notify_all();
      return true;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (cancelled_.load()) return false;
      if (http_status_ != 200) {
        error_body_.append(data, n);
        return true;
      }
      pending.append(data, n);
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        auto j = json::parse(pending.substr(0, nl), nullptr, false);
        pending.erase(0, nl + 1);
        auto e = j.is_discarded() ? Result<wire::Event>(invalid_argument("not JSON")) : wire::event_from_json(j);
        if (!e) continue;  // a line from a newer engine we cannot read: skip it
        saw_end = saw_end || e->type == wire::Event::Type::kDone || e->type == wire::Event::Type::kError;
        events_.push(std::move(e).value());
      }
      return true;
    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    const bool ok = client.send(req, res, err);
    if (!saw_end && http_status_ == 200) {
      wire::Event e;
      e.type = wire::Event::Type::kError;
      e.code = cancelled_.load() ? wire::ErrorCode::kInternal : wire::ErrorCode::kUnavailable;
      e.message = cancelled_.load() ? "cancelled" : "engine connection lost or silent mid-generation";
      events_.push(std::move(e));
    }
    std::lock_guard lock(mu_);
    if (!ok && http_status_ == 0) transport_error_ = httplib::to_string(err);
    ended_ = true;
    cv_.notify_all();
  }

  const std::string host_;
  const int port_;
  const std::string key_;
  const std::string id_;
  const int stall_s_;
  engine::RequestHandle events_;  // the queue the reader fills and next() drains
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool headers_seen_ = false, ended_ = false;
  int http_status_ = 0;
  std::string error_body_, transport_error_;
  std::thread thread_;
};

class RemoteBackend final : public GenerationBackend {
 public:
  RemoteBackend(std::string host, std::shared_ptr<const std::atomic<int>> port, std::string key, ModelInfo info,
                int stall_s)
      : host_(std::move(host)), port_(std::move(port)), key_(std::move(key)), info_(std::move(info)), stall_s_(stall_s) {}

  Result<wire::LookupReply> lookup(const wire::LookupRequest& request) override {
    httplib::Client c(host_, port());
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(stall_s_, 0);  // a lookup is quick: an engine this slow to answer hangs
    auto r = c.Post("/engine/v1/lookup", protocol_headers(key_), to_json(request).dump(), "application/json");
    if (!r) return engine_unavailable(httplib::to_string(r.error()));
    if (r->status != 200) return status_from_reply(r->status, r->body);
    auto j = json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return internal_error("engine lookup reply is not JSON");
    return wire::lookup_reply_from_json(j);
  }

  Result<std::unique_ptr<Generation>> start(const wire::GenerateRequest& request) override {
    auto g = std::make_unique<RemoteGeneration>(host_, port(), key_, request.id, to_json(request).dump(), stall_s_);
    FT_RETURN_IF_ERROR(g->admitted());
    return std::unique_ptr<Generation>(std::move(g));
  }

  const ModelInfo& info() const override { return info_; }

  // Short timeouts: a stats page must not hang.
  json status() override { return get_engine_document(host_, port(), key_, "/engine/v1/status"); }
  json memory() override { return get_engine_document(host_, port(), key_, "/engine/v1/memory"); }

  Result<json> resize_gpu_memory(std::uint64_t budget_bytes) override {
    httplib::Client c(host_, port());
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(60, 0);  // waits for the pass in progress, then frees or allocates
    auto r = c.Post("/engine/v1/gpu-memory", protocol_headers(key_), json{{"budget_bytes", budget_bytes}}.dump(),
                    "application/json");
    if (!r) return engine_unavailable(httplib::to_string(r.error()));
    auto j = json::parse(r->body, nullptr, false);
    if (r->status == 200 && j.is_object()) return j;
    const std::string message = j.is_object() && j.contains("message") && j["message"].is_string()
                                    ? j["message"].get<std::string>()
                                    : "engine answered " + std::to_string(r->status);
    return r->status == 400 ? invalid_argument(message) : unavailable(message);
  }

 private:

  int port() const { return port_->load(); }

  std::string host_;
  std::shared_ptr<const std::atomic<int>> port_;
  std::string key_;
  ModelInfo info_;
  int stall_s_;
};

}  // namespace

json get_engine_document(const std::string& host, int port, const std::string& key, const char* path,
                         int read_timeout_s) {
  httplib::Client c(host, port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(read_timeout_s, 0);
  auto r = c.Get(path, protocol_headers(key));
  if (!r || r->status != 200) return {{"error", "engine unavailable"}};
  auto j = json::parse(r->body, nullptr, false);
  return j.is_discarded() ? json{{"error", std::string("engine answered ") + path + " with something not JSON"}} : j;
}

Result<std::unique_ptr<GenerationBackend>> make_remote_backend(const std::string& host, int port,
                                                               int connect_timeout_ms, const std::string& key,
                                                               int stall_timeout_s) {
  return make_remote_backend(host, std::make_shared<const std::atomic<int>>(port), connect_timeout_ms, key,
                             stall_timeout_s);
}

Result<std::unique_ptr<GenerationBackend>> make_remote_backend(const std::string& host,
                                                               std::shared_ptr<const std::atomic<int>> port_source,
                                                               int connect_timeout_ms, const std::string& key,
                                                               int stall_timeout_s) {
  const int port = port_source->load();
  const auto deadline = Clock::now() + std::chrono::milliseconds(connect_timeout_ms);
  std::string last_error = "no answer";
  for (;;) {
    httplib::Client c(host, port);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(10, 0);
    if (auto r = c.Get("/engine/v1/status", protocol_headers(key))) {
      if (r->status == 401)
        return unavailable("engine at " + host + ":" + std::to_string(port) + " needs a key this proxy does not have");
      auto j = json::parse(r->body, nullptr, false);
      if (r->status != 200 || j.is_discarded() || !j.contains("model"))
        return unavailable("engine at " + host + ":" + std::to_string(port) + " answered a bad status");
      if (j.value("version", 0) != wire::kProtocolVersion)
        return unsupported("engine at " + host + ":" + std::to_string(port) + " speaks " +
                           j.value("protocol", std::string("?")) + "; this proxy speaks " + wire::kProtocolName);
      return std::unique_ptr<GenerationBackend>(
          std::make_unique<RemoteBackend>(host, port_source, key, model_info_from_status(j), stall_timeout_s));
    } else {
      last_error = httplib::to_string(r.error());
    }
    if (Clock::now() >= deadline)
      return engine_unavailable("no engine at " + host + ":" + std::to_string(port) + " (" + last_error + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace ft::proxy
