// A layer of random bf16 experts in ordinary host memory, for measuring the expert paths without a
// model: `bench share` computes on it as it is, and SyntheticExpertLayer (offload_bandwidth.h)
// registers it with the GPU as the engine registers a mapped checkpoint.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "ft/common/result.h"
#include "ft/engine/backend.h"

namespace ft::engine {

struct HostExpertLayer {
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> bytes;  // 2 MiB aligned, a whole number of 2 MiB
  std::size_t size = 0;
  MoeWeights w;  // experts' gate, up, down (inter x hidden, inter x hidden, hidden x inter) in bytes
};

// `experts` experts of hidden x inter in bf16, small random values (a few distinct patterns,
// repeated: only the bytes' movement matters); the router spec says experts and top_k.
Result<HostExpertLayer> make_host_expert_layer(int experts, int hidden, int inter, int top_k);

}  // namespace ft::engine
