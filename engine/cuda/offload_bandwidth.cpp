// measure_offload_bandwidth and the synthetic expert layer (offload_bandwidth.h), on the GPU.
#include "ft/engine/offload_bandwidth.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device_memory.h"
#include "expert_slots.h"

namespace ft::engine {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBuffers = 8;  // device destinations the copies cycle through

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Copies of w's experts, cycling, into `dst` on `s`: `n` experts from `first`.
void enqueue_copies(const MoeWeights& w, std::byte* const* dst, int first, int n, cudaStream_t s) {
  for (int i = 0; i < n; ++i) {
    const SwiGluMatrices& m = w.experts[std::size_t((first + i) % int(w.experts.size()))];
    std::byte* d = dst[(first + i) % kBuffers];
    cuda::copy_expert_async(m, {d, d + m.gate.bytes(), d + m.gate.bytes() + m.up.bytes()}, s);
  }
}

}  // namespace

Result<SplitCosts> measure_offload_bandwidth(const MoeWeights& w, CpuExperts& cpu, double seconds) {
  if (w.experts.empty()) return invalid_argument("no experts to measure");
  const std::size_t bytes = w.experts.front().bytes();
  const int E = int(w.experts.size()), K = std::min(E, 8);
  std::vector<std::byte*> dst(kBuffers, nullptr);
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  const auto release = [&] {
    for (std::byte* d : dst) cudaFree(d);
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    if (s) cudaStreamDestroy(s);
    cudaGetLastError();
  };
  for (std::byte*& d : dst) {
    if (cudaMalloc(reinterpret_cast<void**>(&d), bytes) != cudaSuccess) {
      release();
      return unavailable("no room on the GPU to measure expert copies");
    }
  }
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  // One token through K experts at a time, cycling over the layer (more than the last-level cache).
  std::vector<float> x(std::size_t(w.hidden), 0.01f), y(std::size_t(w.hidden)), weights(std::size_t(K), 1.f);
  std::vector<int32_t> chosen(static_cast<std::size_t>(K));
  int next_cpu = 0;
  const auto cpu_for = [&](double secs) {
    std::size_t done = 0;
    const auto t0 = Clock::now();
    while (since(t0) < secs) {
      for (int i = 0; i < K; ++i) chosen[std::size_t(i)] = (next_cpu + i) % E;
      next_cpu = (next_cpu + K) % E;
      cpu.run(w, x.data(), 1, std::size_t(K), chosen.data(), weights.data(), y.data());
      done += std::size_t(K) * bytes;
    }
    return double(done) / since(t0) / 1e9;
  };
  // Copies: enough for `secs` at `rate` GB/s queued at once, timed by events.
  int next_copy = 0;
  const auto copies = [&](double secs, double rate) {
    const int n = std::max(kBuffers, int(secs * rate * 1e9 / double(bytes)));
    cudaEventRecord(a, s);
    enqueue_copies(w, dst.data(), next_copy, n, s);
    next_copy = (next_copy + n) % E;
    cudaEventRecord(b, s);
    return n;
  };
  const auto copy_rate = [&](int n) {
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms > 0 ? double(n) * double(bytes) / (double(ms) * 1e-3) / 1e9 : 0.0;
  };
  SplitCosts c;
  cpu_for(std::min(seconds, 0.05));  // threads started, pages faulted
  copy_rate(copies(0.02, 50));
  c.pcie_gbps = copy_rate(copies(seconds, 50));
  c.cpu_gbps = cpu_for(seconds);
  // Both at once: the copies (as many as take `seconds` alone) issued from a thread of their own,
  // since a long queue of copies blocks the thread issuing them, while this one runs the CPU.
  double shared_pcie = 0;
  std::thread copier([&] { shared_pcie = copy_rate(copies(seconds, c.pcie_gbps)); });
  c.cpu_shared_gbps = cpu_for(seconds);
  copier.join();
  c.pcie_shared_gbps = shared_pcie;
  const cudaError_t err = cudaGetLastError();
  release();
  if (err != cudaSuccess) return unavailable(cuda::error_text("measuring expert copies", err));
  c.pcie_shared_gbps = std::min(c.pcie_shared_gbps, c.pcie_gbps);
  c.cpu_shared_gbps = std::min(c.cpu_shared_gbps, c.cpu_gbps);
  return c;
}

Result<SyntheticExpertLayer> SyntheticExpertLayer::create(int experts, int hidden, int inter, int top_k) {
  Result<HostExpertLayer> host = make_host_expert_layer(experts, hidden, inter, top_k);
  if (!host) return host.status();
  SyntheticExpertLayer l;
  l.host_ = std::move(*host);
  // Ordinary memory, registered like a model's mapped checkpoint (what the engine copies from and
  // its CPU experts read), not cudaHostAlloc's.
  if (cudaHostRegister(l.host_.bytes.get(), l.host_.size, cudaHostRegisterDefault) != cudaSuccess) {
    cudaGetLastError();
    return unavailable("cannot pin " + std::to_string(l.host_.size >> 20) + " MiB of host memory");
  }
  l.registered_ = true;
  return l;
}

SyntheticExpertLayer::SyntheticExpertLayer(SyntheticExpertLayer&& o) noexcept
    : host_(std::move(o.host_)), registered_(std::exchange(o.registered_, false)) {}
SyntheticExpertLayer& SyntheticExpertLayer::operator=(SyntheticExpertLayer&& o) noexcept {
  if (this != &o) {
    release();
    host_ = std::move(o.host_);
    registered_ = std::exchange(o.registered_, false);
  }
  return *this;
}
SyntheticExpertLayer::~SyntheticExpertLayer() { release(); }
void SyntheticExpertLayer::release() {
  if (registered_) cudaHostUnregister(host_.bytes.get());
  host_ = {};
  registered_ = false;
}

}  // namespace ft::engine
