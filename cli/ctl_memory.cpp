#include "ctl_memory.h"

#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "ft/engine/placement.h"

namespace ft::cli {
namespace {

using nlohmann::json;

constexpr char kCmd[] = "ctl memory";

std::uint64_t field(const json& j, const char* name) {
  return j.is_object() && j.contains(name) && j[name].is_number_unsigned() ? j[name].get<std::uint64_t>() : 0;
}

}  // namespace

int run_ctl_memory(const Args& args) {
  if (!args.has("gpu-mem")) return usage_error(kCmd, "--gpu-mem GiB is required (the GPU memory the model may use)");
  const double gib = args.get_double("gpu-mem");
  if (!(gib > 0) || gib > 1 << 20) return usage_error(kCmd, "--gpu-mem must be a positive number of GiB");
  const std::string host = args.get("host");
  const int port = args.get_int("port");
  httplib::Client c(host, port);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(120, 0);
  httplib::Headers headers;
  if (args.has("api-key")) headers.emplace("Authorization", "Bearer " + args.get("api-key"));
  const auto bytes = std::uint64_t(gib * double(1ull << 30));
  auto r = c.Post("/v1/gpu-memory", headers, json{{"budget_bytes", bytes}}.dump(), "application/json");
  const std::string where = "http://" + host + ":" + std::to_string(port);
  if (!r)
    return runtime_error(kCmd, "no FreeToken server answers at " + where + " (" + httplib::to_string(r.error()) + ")");
  const json body = json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    const std::string message = body.is_object() && body.contains("error") && body["error"].is_object()
                                    ? body["error"].value("message", std::string("?"))
                                    : r->body;
    return r->status == 400 || r->status == 403
               ? usage_error(kCmd, message)
               : runtime_error(kCmd, where + " answered HTTP " + std::to_string(r->status) + ": " + message);
  }
  if (args.has("json")) {
    std::printf("%s\n", body.dump(2).c_str());
    return 0;
  }
  const json p = body.value("placement", json::object());
  const json experts = p.value("experts", json::object());
  std::printf("GPU memory: %s in use of the %s asked for; expert cache %llu slots (%s)\n",
              engine::gib_text(field(p, "total_bytes")).c_str(), engine::gib_text(bytes).c_str(),
              static_cast<unsigned long long>(field(experts, "slots")),
              engine::gib_text(field(experts, "cache_bytes")).c_str());
  return 0;
}

}  // namespace ft::cli
