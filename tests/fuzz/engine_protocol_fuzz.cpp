// libFuzzer target for the engine protocol's readers (protocol/engine_protocol.h), both ways: the
// engine reads generate and lookup requests, the proxy reads lookup replies, stream events and
// error replies. The first byte picks the reader, the rest is the document, guarded and parsed as
// the servers do. A document read must survive a round trip: written back and read again it gives
// the same JSON.
#include <cstdint>
#include <string>

#include "ft/protocol/engine_protocol.h"
#include "ft/protocol/json_depth.h"
#include "fuzz_check.h"

namespace {

template <typename Read>
void round_trip(const nlohmann::json& j, Read read) {
  auto first = read(j);
  if (!first) {
    if (first.status().message().empty()) ft::fuzz::fail("a refusal without a message");
    return;
  }
  const nlohmann::json written = ft::protocol::engine::to_json(*first);
  auto second = read(written);
  if (!second) ft::fuzz::fail("a written document does not read back: " + second.status().message());
  if (ft::protocol::engine::to_json(*second) != written) ft::fuzz::fail("a round trip changed the document");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace wire = ft::protocol::engine;
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (!ft::protocol::json_depth_within(body)) return 0;  // both sides refuse it unread
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return 0;
  switch (data[0] % 5) {
    case 0:
      round_trip(j, wire::generate_request_from_json);
      break;
    case 1:
      round_trip(j, wire::lookup_request_from_json);
      break;
    case 2:
      round_trip(j, wire::lookup_reply_from_json);
      break;
    case 3:
      round_trip(j, wire::event_from_json);
      break;
    default:
      round_trip(j, wire::error_reply_from_json);
      break;
  }
  return 0;
}
