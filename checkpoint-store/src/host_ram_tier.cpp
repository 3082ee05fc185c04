#include "ft/store/host_ram_tier.h"

namespace ft::store {
namespace {

class InRam final : public MemoryTier::Payload {
 public:
  explicit InRam(std::shared_ptr<const ModelState> state) : state_(std::move(state)) {}
  Status read(const ModelStateHeader&, const ChunkSink& sink) const override {
    for (std::size_t i = 0; i < state_->chunks.size(); ++i) {
      const auto& data = state_->chunks[i].data;
      if (!data.empty()) FT_RETURN_IF_ERROR(sink({i, 0, data}));
    }
    return Status::ok();
  }
  std::shared_ptr<const ModelState> state() const override { return state_; }

 private:
  std::shared_ptr<const ModelState> state_;
};

}  // namespace

HostRamTier::HostRamTier(std::uint64_t byte_budget)
    : MemoryTier(
          "host-ram", byte_budget,
          [](std::shared_ptr<const ModelState> state) {
            return Result<std::shared_ptr<const Payload>>(std::make_shared<const InRam>(std::move(state)));
          },
          Counting::kSharedChunksOnce) {}

}  // namespace ft::store
