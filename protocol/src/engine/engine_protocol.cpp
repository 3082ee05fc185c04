#include "ft/protocol/engine_protocol.h"

#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace ft::protocol::engine {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<ErrorCode, const char*>, 7> kErrorNames = {{
    {ErrorCode::kInvalidRequest, "invalid_request"},
    {ErrorCode::kContextTooLong, "context_too_long"},
    {ErrorCode::kOverloaded, "overloaded"},
    {ErrorCode::kRestoreMiss, "restore_miss"},
    {ErrorCode::kInternal, "internal"},
    {ErrorCode::kUnauthorized, "unauthorized"},
    {ErrorCode::kUnavailable, "unavailable"},
}};
constexpr std::array<std::pair<Finish, const char*>, 3> kFinishNames = {{
    {Finish::kStop, "stop"},
    {Finish::kLength, "length"},
    {Finish::kCancelled, "cancelled"},
}};
constexpr std::array<std::pair<Event::Type, const char*>, 5> kEventNames = {{
    {Event::Type::kStarted, "started"},
    {Event::Type::kTokens, "tokens"},
    {Event::Type::kCheckpoint, "checkpoint"},
    {Event::Type::kDone, "done"},
    {Event::Type::kError, "error"},
}};

template <typename E, std::size_t N>
std::optional<E> from_name(const std::array<std::pair<E, const char*>, N>& names, const std::string& s) {
  for (const auto& [e, n] : names)
    if (s == n) return e;
  return std::nullopt;
}
template <typename E, std::size_t N>
const char* to_name(const std::array<std::pair<E, const char*>, N>& names, E e) {
  for (const auto& [v, n] : names)
    if (v == e) return n;
  return "?";
}

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// Whether `v` holds a T exactly, and then `out` = it. nlohmann's get<T>() converts silently: a
// float too large for an int is undefined behaviour, 4294967297 wraps to 1 in an int32, 1e300
// overflows a float. Numbers are range-checked here instead.
template <typename T>
bool read_value(const json& v, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return false;
    out = v.get<bool>();
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    using L = std::numeric_limits<T>;
    if (v.is_number_unsigned()) {
      const std::uint64_t u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(L::max())) return false;
      out = static_cast<T>(u);
      return true;
    }
    if (!v.is_number_integer()) return false;
    const std::int64_t i = v.get<std::int64_t>();
    if (i < 0 && !L::is_signed) return false;
    if (L::is_signed && (i < static_cast<std::int64_t>(L::min()) || i > static_cast<std::int64_t>(L::max())))
      return false;
    out = static_cast<T>(i);
    return true;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return false;
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(std::numeric_limits<T>::max())) return false;
    out = static_cast<T>(d);
    return true;
  } else if constexpr (IsVector<T>::value) {
    if (!v.is_array()) return false;
    T items;
    items.reserve(v.size());
    for (const json& e : v) {
      typename T::value_type x{};
      if (!read_value(e, x)) return false;
      items.push_back(std::move(x));
    }
    out = std::move(items);
    return true;
  } else {
    static_assert(std::is_same_v<T, std::string>, "read_value: add the type");
    if (!v.is_string()) return false;
    out = v.get<std::string>();
    return true;
  }
}

// Reads one field with a type check; absent optional fields keep their default.
class Reader {
 public:
  Reader(const json& j, std::string what) : j_(j), what_(std::move(what)) {
    if (!j_.is_object()) status_ = invalid_argument(what_ + ": expected a JSON object");
  }

  template <typename T>
  void get(const char* field, T& out, bool required = false) {
    if (!status_) return;
    auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) {
      if (required) status_ = invalid_argument(what_ + ": missing field '" + field + "'");
      return;
    }
    if (!read_value(*it, out))
      status_ = invalid_argument(what_ + ": field '" + field + "' has the wrong type or is out of range");
  }

  void key(const char* field, PrefixKey& out, bool required = true) {
    std::string hex;
    get(field, hex, required);
    if (!status_ || hex.empty()) return;
    auto k = PrefixKey::from_hex(hex);
    if (!k) {
      status_ = invalid_argument(what_ + ": field '" + field + "' is not a 32-digit hex key");
      return;
    }
    out = *k;
  }

  void fail(const std::string& message) {
    if (status_) status_ = invalid_argument(what_ + ": " + message);
  }
  const json* child(const char* field) const {
    auto it = j_.find(field);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  const Status& status() const { return status_; }

 private:
  const json& j_;
  std::string what_;
  Status status_;
};

json snapshot_json(const SnapshotRequest& s) {
  json j = {{"position", s.position}, {"key", s.key.to_hex()}};
  if (s.pin) j["pin"] = true;
  return j;
}

Result<SnapshotRequest> snapshot_from_json(const json& j, const std::string& what) {
  Reader r(j, what);
  SnapshotRequest s;
  r.get("position", s.position, true);
  r.key("key", s.key);
  r.get("pin", s.pin);
  if (!r.status()) return r.status();
  if (s.position <= 0) return invalid_argument(what + ": position must be > 0");
  return s;
}

}  // namespace

const char* error_code_name(ErrorCode code) { return to_name(kErrorNames, code); }
const char* finish_name(Finish finish) { return to_name(kFinishNames, finish); }

json to_json(const GenerateRequest& r) {
  json j = {{"id", r.id},
            {"tenant", r.tenant},
            {"tokens", r.tokens},
            {"sampling",
             {{"temperature", r.sampling.temperature},
              {"top_p", r.sampling.top_p},
              {"top_k", r.sampling.top_k},
              {"min_p", r.sampling.min_p},
              {"seed", r.sampling.seed}}},
            {"stop_ids", r.stop_ids},
            {"max_new_tokens", r.max_new_tokens}};
  if (r.restore) j["restore"] = {{"key", r.restore->key.to_hex()}, {"tokens", r.restore->tokens}};
  json snaps = json::array();
  for (const auto& s : r.snapshots) snaps.push_back(snapshot_json(s));
  j["snapshots"] = std::move(snaps);
  json unpin = json::array();
  for (const auto& k : r.unpin) unpin.push_back(k.to_hex());
  j["unpin"] = std::move(unpin);
  return j;
}

Result<GenerateRequest> generate_request_from_json(const json& j) {
  Reader r(j, "generate");
  GenerateRequest g;
  r.get("id", g.id, true);
  r.get("tenant", g.tenant, true);
  r.get("tokens", g.tokens, true);
  r.get("stop_ids", g.stop_ids);
  r.get("max_new_tokens", g.max_new_tokens, true);
  if (const json* s = r.child("sampling")) {
    Reader rs(*s, "generate.sampling");
    rs.get("temperature", g.sampling.temperature);
    rs.get("top_p", g.sampling.top_p);
    rs.get("top_k", g.sampling.top_k);
    rs.get("min_p", g.sampling.min_p);
    rs.get("seed", g.sampling.seed);
    if (!rs.status()) return rs.status();
  }
  if (const json* rp = r.child("restore")) {
    Reader rr(*rp, "generate.restore");
    RestorePoint p;
    rr.key("key", p.key);
    rr.get("tokens", p.tokens, true);
    if (!rr.status()) return rr.status();
    if (p.tokens <= 0) return invalid_argument("generate.restore: tokens must be > 0");
    g.restore = p;
  }
  if (const json* snaps = r.child("snapshots")) {
    if (!snaps->is_array()) return invalid_argument("generate: field 'snapshots' has the wrong type");
    for (const json& s : *snaps) {
      FT_ASSIGN_OR_RETURN(SnapshotRequest snap, snapshot_from_json(s, "generate.snapshots[]"));
      g.snapshots.push_back(snap);
    }
  }
  if (const json* unpin = r.child("unpin")) {
    if (!unpin->is_array()) return invalid_argument("generate: field 'unpin' has the wrong type");
    for (const json& k : *unpin) {
      auto key = k.is_string() ? PrefixKey::from_hex(k.get<std::string>()) : std::nullopt;
      if (!key) return invalid_argument("generate.unpin[]: not a 32-digit hex key");
      g.unpin.push_back(*key);
    }
  }
  if (!r.status()) return r.status();
  if (g.id.empty()) return invalid_argument("generate: id is empty");
  if (g.tenant.empty()) return invalid_argument("generate: tenant is empty");
  if (g.tokens.empty()) return invalid_argument("generate: no tokens to process (the suffix must hold at least one)");
  if (g.max_new_tokens < 0) return invalid_argument("generate: max_new_tokens must be >= 0");
  const std::int64_t start = g.restore ? g.restore->tokens : 0;
  std::int64_t last = start;
  for (const auto& s : g.snapshots) {
    if (s.position <= last || s.position > g.prompt_tokens()) {
      return invalid_argument("generate: snapshot positions must increase within (restored tokens, prompt end]");
    }
    last = s.position;
  }
  return g;
}

json to_json(const LookupRequest& r) {
  json keys = json::array();
  for (const auto& k : r.keys) keys.push_back(k.to_hex());
  return {{"tenant", r.tenant}, {"keys", std::move(keys)}};
}

Result<LookupRequest> lookup_request_from_json(const json& j) {
  Reader r(j, "lookup");
  LookupRequest l;
  std::vector<std::string> keys;
  r.get("tenant", l.tenant, true);
  r.get("keys", keys, true);
  if (!r.status()) return r.status();
  if (l.tenant.empty()) return invalid_argument("lookup: tenant is empty");
  for (const auto& hex : keys) {
    auto k = PrefixKey::from_hex(hex);
    if (!k) return invalid_argument("lookup.keys[]: not a 32-digit hex key");
    l.keys.push_back(*k);
  }
  return l;
}

json to_json(const LookupReply& r) {
  json j = {{"tokens", r.tokens}};
  j["index"] = r.index ? json(*r.index) : json(nullptr);
  return j;
}

Result<LookupReply> lookup_reply_from_json(const json& j) {
  Reader r(j, "lookup reply");
  LookupReply l;
  std::int64_t index = -1;
  r.get("index", index);
  r.get("tokens", l.tokens);
  if (!r.status()) return r.status();
  if (index >= 0) l.index = std::size_t(index);
  return l;
}

json to_json(const Event& e) {
  json j = {{"event", to_name(kEventNames, e.type)}};
  switch (e.type) {
    case Event::Type::kStarted:
      j["restored"] = e.restored;
      break;
    case Event::Type::kTokens:
      j["tokens"] = e.tokens;
      break;
    case Event::Type::kCheckpoint:
      j["checkpoint"] = snapshot_json(e.checkpoint);
      break;
    case Event::Type::kDone:
      j["finish"] = finish_name(e.finish);
      j["usage"] = {{"prompt_tokens", e.usage.prompt_tokens}, {"cached_tokens", e.usage.cached_tokens},
                    {"new_tokens", e.usage.new_tokens},       {"prefill_ms", e.usage.prefill_ms},
                    {"decode_ms", e.usage.decode_ms}};
      break;
    case Event::Type::kError:
      j["code"] = error_code_name(e.code);
      j["message"] = e.message;
      break;
  }
  return j;
}

Result<Event> event_from_json(const json& j) {
  Reader r(j, "event");
  std::string type;
  r.get("event", type, true);
  if (!r.status()) return r.status();
  auto t = from_name(kEventNames, type);
  if (!t) return invalid_argument("event: unknown type '" + type + "'");
  Event e;
  e.type = *t;
  switch (e.type) {
    case Event::Type::kStarted:
      r.get("restored", e.restored);
      break;
    case Event::Type::kTokens:
      r.get("tokens", e.tokens, true);
      break;
    case Event::Type::kCheckpoint: {
      const json* c = r.child("checkpoint");
      if (!c) return invalid_argument("event: checkpoint without 'checkpoint'");
      FT_ASSIGN_OR_RETURN(e.checkpoint, snapshot_from_json(*c, "event.checkpoint"));
      break;
    }
    case Event::Type::kDone: {
      std::string finish;
      r.get("finish", finish, true);
      if (const json* u = r.child("usage")) {
        Reader ru(*u, "event.usage");
        ru.get("prompt_tokens", e.usage.prompt_tokens);
        ru.get("cached_tokens", e.usage.cached_tokens);
        ru.get("new_tokens", e.usage.new_tokens);
        ru.get("prefill_ms", e.usage.prefill_ms);
        ru.get("decode_ms", e.usage.decode_ms);
        if (!ru.status()) return ru.status();
      }
      if (!r.status()) return r.status();
      auto f = from_name(kFinishNames, finish);
      if (!f) return invalid_argument("event: unknown finish '" + finish + "'");
      e.finish = *f;
      break;
    }
    case Event::Type::kError: {
      FT_ASSIGN_OR_RETURN(ErrorReply er, error_reply_from_json(j));
      e.code = er.code;
      e.message = std::move(er.message);
      break;
    }
  }
  if (!r.status()) return r.status();
  return e;
}

Status to_status(const ErrorReply& e) {
  switch (e.code) {
    case ErrorCode::kOverloaded:
      return unavailable(e.message.rfind("overloaded", 0) == 0 ? e.message : "overloaded: " + e.message);
    case ErrorCode::kInvalidRequest:
    case ErrorCode::kContextTooLong:
      return invalid_argument(e.message);
    case ErrorCode::kRestoreMiss:
      return not_found(e.message);
    case ErrorCode::kUnauthorized:
      return internal_error("the engine refused this proxy's key: " + e.message);
    case ErrorCode::kUnavailable:
      return unavailable("engine: " + e.message);
    case ErrorCode::kInternal:
      break;
  }
  return internal_error(e.message);
}

json to_json(const ErrorReply& e) { return {{"code", error_code_name(e.code)}, {"message", e.message}}; }

Result<ErrorReply> error_reply_from_json(const json& j) {
  Reader r(j, "error");
  std::string code;
  ErrorReply e;
  r.get("code", code, true);
  r.get("message", e.message);
  if (!r.status()) return r.status();
  auto c = from_name(kErrorNames, code);
  e.code = c ? *c : ErrorCode::kInternal;  // an unknown code from a newer engine is still an error
  return e;
}

}  // namespace ft::protocol::engine
