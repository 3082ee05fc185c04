#include "ft/store/tiered_store.h"

namespace ft::store {

Result<std::unique_ptr<TieredStore>> TieredStore::open(StoreOptions options) {
  const std::uint64_t ram_budget = options.ram_budget;
  auto ram = std::make_unique<HostRamTier>(ram_budget);
  FT_ASSIGN_OR_RETURN(auto disk, RocksDbStore::open(std::move(options)));
  HostRamTier* ram_ptr = ram.get();
  RocksDbStore* disk_ptr = disk.get();
  std::vector<std::unique_ptr<StateTier>> tiers;
  tiers.push_back(std::move(ram));
  tiers.push_back(std::move(disk));
  return std::unique_ptr<TieredStore>(new TieredStore(std::move(tiers), ram_budget, ram_ptr, disk_ptr));
}

}  // namespace ft::store
