// Every kernel of the backend is launched through launch(), with programmatic dependent launch where
// the GPU has it (sm_90 and newer): the next kernel on the stream is launched while this one runs,
// its blocks are placed on the SMs and wait in pdl_enter() until this one has finished and its
// writes are visible. A decode step is ~15 short kernels a layer, each of which used to pay its
// launch and block placement after the previous one ended.
//
// The rule that keeps this correct: every kernel launched by launch() calls pdl_enter() on every
// path before it returns, and before it reads anything its predecessor wrote. A kernel that
// returned without waiting could finish before its predecessor, and the kernel after it, which
// waits only for its immediate predecessor, would then read unfinished results.
//
// What a kernel may read before pdl_enter(): what no kernel writes (weights, expert tables, the pass's
// uploads: positions, page tables; a copy is an ordinary dependency, never overlapped) and what
// kernels two or more launches back wrote. Its predecessor lets it launch only after having waited
// itself, so by the time it runs, every kernel before its predecessor has finished. The decode
// products, the norms and attention use this to start their trips to memory (weights, page tables)
// while the previous kernel still runs; the down product of the MoE reads the router's choices (two
// launches back) and asks L2 for the chosen rows while gate/up runs.
// Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace ft::engine::cuda {

// Waits for the previous kernel on the stream (and so, transitively, every earlier one) and then
// lets the next one be launched.
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Asks L2 for the line holding p, without waiting for it: a kernel names the weights it is about to
// read before pdl_enter(), so that their trip from memory overlaps the previous kernel instead of
// following it. Only for what no kernel writes (the rule above).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Whether the current device takes programmatic dependent launches (asked once per device).
bool pdl_supported();

// A measuring aid, read once from the environment: FT_CUDA_LEAVE_OUT=name[@grid.x],... leaves out
// every launch of a kernel whose (mangled) name contains `name` (and whose grid.x is `grid`, where
// given); FT_CUDA_TRACE_LAUNCHES=1 prints each launch (name, grid, block) to stderr. A step whose
// kernels are left out computes wrong values: only its time is read, the difference being what
// that kernel costs the step where the launches overlap (docs/perf-notes.md). Off: one flag test.
bool launch_left_out(const void* kernel, dim3 grid, dim3 block);

// kernel<<<grid, block, smem, s>>>(args...), as a programmatic dependent launch where supported.
// `extra`: further launch attributes (a cluster shape), at most 2.
template <typename... Params, typename... Args>
void launch_with(const cudaLaunchAttribute* extra, int n_extra, void (*kernel)(Params...), dim3 grid, dim3 block,
                 std::size_t smem, cudaStream_t s, Args&&... args) {
  if (launch_left_out(reinterpret_cast<const void*>(kernel), grid, block)) return;
  cudaLaunchAttribute attrs[3] = {};
  int n = 0;
  for (int i = 0; i < n_extra && i < 2; ++i) attrs[n++] = extra[i];
  if (pdl_supported()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attrs;
  cfg.numAttrs = unsigned(n);
  cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t s, Args&&... args) {
  launch_with(nullptr, 0, kernel, grid, block, smem, s, std::forward<Args>(args)...);
}

}  // namespace ft::engine::cuda
