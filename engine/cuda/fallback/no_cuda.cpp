// Stand-ins linked when the build has no CUDA: every GPU entry point reports why it cannot run.
#include "backend/cuda_factory.h"
#include "ft/engine/cuda_ops.h"
#include "ft/engine/device.h"
#include "ft/engine/offload_bandwidth.h"

namespace ft::engine {

namespace {
Status no_cuda() { return unavailable("this build of freetoken has no CUDA support (rebuild with -DFT_CUDA=ON)"); }
}  // namespace

bool built_with_cuda() { return false; }
Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions&) { return no_cuda(); }
Result<CudaDeviceInfo> query_cuda_device(int) { return no_cuda(); }
Result<double> measure_device_copy_gbps(std::size_t, int) { return no_cuda(); }
Result<double> measure_host_to_device_gbps(std::size_t, int) { return no_cuda(); }
Result<double> measure_mapped_read_gbps(std::size_t, int) { return no_cuda(); }
Result<SplitCosts> measure_offload_bandwidth(const MoeWeights&, CpuExperts&, double) { return no_cuda(); }
Result<SyntheticExpertLayer> SyntheticExpertLayer::create(int, int, int, int) { return no_cuda(); }
SyntheticExpertLayer::SyntheticExpertLayer(SyntheticExpertLayer&&) noexcept = default;
SyntheticExpertLayer& SyntheticExpertLayer::operator=(SyntheticExpertLayer&&) noexcept = default;
SyntheticExpertLayer::~SyntheticExpertLayer() = default;
void SyntheticExpertLayer::release() {}

namespace cuda {
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept = default;
Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t) { return no_cuda(); }
}  // namespace cuda

}  // namespace ft::engine
