#include "ft/protocol/conversation.h"

#include "ft/protocol/client_requests.h"
#include "json_fields.h"

namespace ft::protocol {

const char* role_name(Message::Role role) {
  switch (role) {
    case Message::Role::kSystem: return "system";
    case Message::Role::kUser: return "user";
    case Message::Role::kAssistant: return "assistant";
    case Message::Role::kTool: return "tool";
  }
  return "user";
}

std::string canonical_arguments(std::string_view arguments) {
  auto j = detail::Json::parse(arguments, nullptr, false);
  if (j.is_discarded()) return std::string(arguments);
  return j.dump(-1, ' ', false, detail::Json::error_handler_t::replace);
}

}  // namespace ft::protocol
