// The CUDA backend is built only with CUDA (engine/cuda/cuda_backend.cpp); without it this returns
// kUnavailable saying so (engine/cuda/fallback/no_cuda.cpp).
#pragma once

#include <memory>

#include "ft/engine/backend.h"

namespace ft::engine {

Result<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options);

}  // namespace ft::engine
