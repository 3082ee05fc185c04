// Pointer-array batched GEMMs through cuBLASLt with the plan (algorithm) chosen once per shape
// class. The MoE's prefill calls batched GEMMs whose batch size (the slots its experts' rows fill)
// follows the routing, so most calls of a new prompt would have a shape cuBLAS has not planned
// before, and planning costs host time on every such call. Here a plan is made for a class (the
// rows rounded up to a power of two, any batch size) and reused for every shape in it; a shape the
// class's plan does not take gets a plan of its own.
// Internal to engine/cuda.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace ft::engine::cuda {

class LtBatchedGemm {
 public:
  // Null (and `why` set) when cuBLASLt or its workspace cannot be had.
  static std::unique_ptr<LtBatchedGemm> create(std::string& why);
  LtBatchedGemm() = default;  // empty: create() makes a usable one
  ~LtBatchedGemm();
  LtBatchedGemm(const LtBatchedGemm&) = delete;
  LtBatchedGemm& operator=(const LtBatchedGemm&) = delete;

  // For each of `count` problems j: C_j [n, m] = B_j [n, k] W_j^T (+ C_j when `accumulate`), with
  // W_j [m, k] (row stride lda elements) and B_j [n, k] (rows k apart) both of `type` (bf16 or
  // fp16), C_j fp32 [n, m] (rows m apart). w, b, c: device arrays of `count` device pointers.
  // Enqueued on s.
  cublasStatus_t run(const void* const* w, int lda, const void* const* b, void* const* c, int m, int n, int k,
                     int count, bool accumulate, cudaStream_t s, cudaDataType_t type = CUDA_R_16BF);

  // Plans made so far (classes and exact shapes), for the profile.
  std::size_t plans() const { return plans_.size(); }

 private:
  struct Plan {
    cublasLtMatmulAlgo_t algo{};
    bool found = false;
  };
  // m, k, lda, n (a class's bound, or the exact n with exact set), accumulate, exact, type.
  using Key = std::array<int64_t, 7>;
  const Plan& plan(const Key& key, int count);

  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
};

// Whether the MoE's prefill GEMMs go through LtBatchedGemm (the default) rather than
// cublasGemmBatchedEx (FT_CUDA_GEMM=batched), whose host time grows with every shape it has not
// run before: a new prompt's routing makes new ones (docs/perf-notes.md measured 2x).
bool lt_batched_gemm_enabled();

}  // namespace ft::engine::cuda
