// The proxy <-> engine protocol, version 1 (protocol/ENGINE-PROTOCOL.md is the spec): the messages
// as structs and their JSON forms. Transport: HTTP/1.1 on loopback, JSON bodies, the generate
// stream as NDJSON (one event per line). Both sides link this file, so the two can never disagree
// about a field name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ft/common/hash128.h"
#include "ft/common/result.h"

namespace ft::protocol::engine {

inline constexpr int kProtocolVersion = 1;
inline constexpr const char* kProtocolName = "freetoken-engine/1";
// The one header both sides send; a server that sees another version answers 400.
inline constexpr const char* kVersionHeader = "X-FreeToken-Engine-Protocol";

struct Sampling {
  float temperature = 1.0f;  // <= 0: greedy
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  std::uint64_t seed = 0;
};

// "Restore the state saved under `key`; it holds the first `tokens` tokens of this prompt."
struct RestorePoint {
  PrefixKey key;
  std::int64_t tokens = 0;
};

// "Save the state after the first `position` tokens under `key`." pin: keep it from eviction
// (the newest checkpoint of a live session) until a later request unpins it.
struct SnapshotRequest {
  std::int64_t position = 0;
  PrefixKey key;
  bool pin = false;
};

struct GenerateRequest {
  std::string id;      // unique per request; names it for cancel
  std::string tenant;  // namespace of the checkpoints read and written
  std::optional<RestorePoint> restore;
  std::vector<std::int32_t> tokens;  // the prompt after restore->tokens (all of it without restore)
  std::vector<SnapshotRequest> snapshots;  // positions in (restore tokens, prompt end], increasing
  std::vector<PrefixKey> unpin;            // keys this session no longer needs pinned
  Sampling sampling;
  std::vector<std::int32_t> stop_ids;  // generation ends (without emitting) at any of these
  int max_new_tokens = 256;

  std::int64_t prompt_tokens() const { return (restore ? restore->tokens : 0) + std::int64_t(tokens.size()); }
};

struct LookupRequest {
  std::string tenant;
  std::vector<PrefixKey> keys;  // shallow to deep
};
struct LookupReply {
  std::optional<std::size_t> index;  // of the deepest key held
  std::int64_t tokens = 0;           // tokens that checkpoint holds
};

enum class Finish { kStop, kLength, kCancelled };

// Error codes of the engine; the proxy maps them to client statuses.
enum class ErrorCode {
  kInvalidRequest,  // malformed or inconsistent request (400)
  kContextTooLong,  // prompt (+1) beyond the engine's context length (400)
  kOverloaded,      // admission queue full: retry later (proxy: 529/429 + retry-after)
  kRestoreMiss,     // the restore key is gone or failed its checksum: resend without restore
  kInternal,        // anything else (500)
  kUnauthorized,    // the request lacks the engine's key (401): a misconfigured or foreign client
  kUnavailable,     // the engine went away or stopped answering mid-request: a retry can succeed (503)
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t cached_tokens = 0;  // of prompt_tokens, restored instead of computed
  std::int64_t new_tokens = 0;     // tokens emitted (a stop token is not)
  double prefill_ms = 0;
  double decode_ms = 0;
};

struct Event {
  enum class Type { kStarted, kTokens, kCheckpoint, kDone, kError } type = Type::kTokens;
  std::int64_t restored = 0;          // kStarted: tokens restored
  std::vector<std::int32_t> tokens;   // kTokens
  SnapshotRequest checkpoint;         // kCheckpoint: saved
  Finish finish = Finish::kStop;      // kDone
  Usage usage;                        // kDone
  ErrorCode code = ErrorCode::kInternal;  // kError
  std::string message;                    // kError
};

struct ErrorReply {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

const char* error_code_name(ErrorCode code);

// An engine refusal as the Status the proxy surfaces: kUnavailable "overloaded: ..." (the client
// retries), kInvalidArgument (bad request, context too long), kNotFound (restore miss),
// kInternal otherwise.
Status to_status(const ErrorReply& error);
const char* finish_name(Finish finish);

nlohmann::json to_json(const GenerateRequest& r);
nlohmann::json to_json(const LookupRequest& r);
nlohmann::json to_json(const LookupReply& r);
nlohmann::json to_json(const Event& e);
nlohmann::json to_json(const ErrorReply& e);

// kInvalidArgument naming the bad field.
Result<GenerateRequest> generate_request_from_json(const nlohmann::json& j);
Result<LookupRequest> lookup_request_from_json(const nlohmann::json& j);
Result<LookupReply> lookup_reply_from_json(const nlohmann::json& j);
Result<Event> event_from_json(const nlohmann::json& j);
Result<ErrorReply> error_reply_from_json(const nlohmann::json& j);

}  // namespace ft::protocol::engine
