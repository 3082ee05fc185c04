#include "ft/proxy/backend.h"

namespace ft::proxy {

ModelInfo model_info_from_status(const nlohmann::json& status) {
  ModelInfo info;
  const nlohmann::json& m = status.value("model", nlohmann::json::object());
  info.family = m.value("family", "");
  info.fingerprint = m.value("fingerprint", "");
  info.eos_ids = m.value("eos_token_ids", std::vector<int32_t>{});
  info.context_length = m.value("context_length", int64_t(0));
  info.vocab_size = m.value("vocab_size", int64_t(0));
  return info;
}

}  // namespace ft::proxy
