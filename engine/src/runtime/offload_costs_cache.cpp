#include <fstream>
#include <nlohmann/json.hpp>

#include "ft/engine/offload_bandwidth.h"

namespace ft::engine {

Result<SplitCosts> load_offload_costs(const std::filesystem::path& file, const std::string& device, int threads) {
  std::ifstream in(file);
  if (!in) return not_found("no offload bandwidth cache at " + file.string());
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || j.value("device", "") != device || j.value("threads", -1) != threads)
    return not_found("the offload bandwidth cache " + file.string() + " is for another GPU or thread count");
  SplitCosts c;
  c.pcie_gbps = j.value("pcie_gbps", 0.0);
  c.cpu_gbps = j.value("cpu_gbps", 0.0);
  c.pcie_shared_gbps = j.value("pcie_shared_gbps", 0.0);
  c.cpu_shared_gbps = j.value("cpu_shared_gbps", 0.0);
  if (!(c.pcie_gbps > 0) || !(c.cpu_gbps > 0))
    return not_found("the offload bandwidth cache " + file.string() + " is incomplete");
  return c;
}

Status save_offload_costs(const std::filesystem::path& file, const SplitCosts& c, const std::string& device,
                          int threads) {
  const nlohmann::json j = {{"device", device},
                            {"threads", threads},
                            {"pcie_gbps", c.pcie_gbps},
                            {"cpu_gbps", c.cpu_gbps},
                            {"pcie_shared_gbps", c.pcie_shared_gbps},
                            {"cpu_shared_gbps", c.cpu_shared_gbps}};
  std::error_code ec;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!(out << j.dump(2) << "\n")) return io_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) return io_error("cannot write " + file.string() + ": " + ec.message());
  return Status::ok();
}

}  // namespace ft::engine
