// FT_HOST_DEVICE marks a function defined once for the host and the CUDA kernels (nvcc compiles it
// for both; g++ sees a plain inline function).
#pragma once

#if defined(__CUDACC__)
#define FT_HOST_DEVICE __host__ __device__
#else
#define FT_HOST_DEVICE
#endif
