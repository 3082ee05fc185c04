#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "ft/protocol/unicode.h"

namespace ft::protocol::tok {

namespace {

Status collect(const nlohmann::json& spec, bool& nfc) {
  if (spec.is_null()) return Status::ok();
  const std::string type = spec.value("type", std::string());
  if (type == "NFC") {
    nfc = true;
    return Status::ok();
  }
  if (type == "Sequence") {
    for (const auto& n : spec.value("normalizers", nlohmann::json::array())) FT_RETURN_IF_ERROR(collect(n, nfc));
    return Status::ok();
  }
  return unsupported("tokenizer.json: normalizer " + (type.empty() ? spec.dump() : type));
}

}  // namespace

Result<Normalizer> Normalizer::from_json(const nlohmann::json& spec) {
  Normalizer n;
  FT_RETURN_IF_ERROR(collect(spec, n.nfc_));
  return n;
}

bool Normalizer::apply(std::string_view in, std::string& out) const {
  if (!nfc_ || nfc_quick_check(in)) return false;
  out = nfc(in);
  return out != in;
}

}  // namespace ft::protocol::tok
