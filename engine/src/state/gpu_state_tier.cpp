#include "ft/engine/gpu_state_tier.h"

#include <vector>

#include "ft/engine/cuda_ops.h"
#include "ft/engine/device.h"

namespace ft::engine {
namespace {

constexpr std::size_t kPieceBytes = 4u << 20;  // the unit a read hands to the sink

class OnGpu final : public store::MemoryTier::Payload {
 public:
  explicit OnGpu(cuda::DeviceBuffer buffer) : buffer_(std::move(buffer)) {}

  // All chunks live back to back in one allocation, in header order.
  static Result<std::shared_ptr<const Payload>> make(std::shared_ptr<const store::ModelState> state) {
    FT_ASSIGN_OR_RETURN(cuda::DeviceBuffer buffer, cuda::DeviceBuffer::allocate(std::max<std::uint64_t>(1, state->payload_bytes())));
    std::size_t at = 0;
    for (const auto& c : state->chunks) {
      if (!c.data.empty()) FT_RETURN_IF_ERROR(buffer.copy_from_host_at(at, c.data.data(), c.data.size()));
      at += c.data.size();
    }
    return std::shared_ptr<const Payload>(std::make_shared<const OnGpu>(std::move(buffer)));
  }

  Status read(const store::ModelStateHeader& header, const store::ChunkSink& sink) const override {
    std::vector<std::byte> staging(kPieceBytes);
    std::size_t at = 0;
    for (std::size_t i = 0; i < header.chunks.size(); ++i) {
      for (std::uint64_t off = 0; off < header.chunks[i].bytes; off += kPieceBytes) {
        const std::size_t n = std::size_t(std::min<std::uint64_t>(kPieceBytes, header.chunks[i].bytes - off));
        FT_RETURN_IF_ERROR(buffer_.copy_to_host_at(at + off, staging.data(), n));
        FT_RETURN_IF_ERROR(sink({i, off, std::span<const std::byte>(staging.data(), n)}));
      }
      at += header.chunks[i].bytes;
    }
    return Status::ok();
  }

 private:
  cuda::DeviceBuffer buffer_;
};

}  // namespace

Result<std::unique_ptr<store::MemoryTier>> make_gpu_state_tier(std::uint64_t byte_budget) {
  FT_RETURN_IF_ERROR(query_cuda_device(0).status());
  return std::make_unique<store::MemoryTier>("gpu", byte_budget, OnGpu::make);
}

}  // namespace ft::engine
