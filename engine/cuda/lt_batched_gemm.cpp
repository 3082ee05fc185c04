// lt_batched_gemm.h: cuBLASLt matmuls in pointer-array batch mode, plans kept per shape class.
#include "lt_batched_gemm.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>

namespace ft::engine::cuda {
namespace {

// What the largest plans ask for (split-k reductions); the heuristic is told this much is there.
constexpr std::size_t kWorkspaceBytes = 32u << 20;

// The layouts of one call, destroyed with it. Column-major as cuBLAS sees them: W^T is k x m (ld
// lda), B^T is k x n (ld k), C^T is m x n (ld m).
class Layouts {
 public:
  Layouts(int m, int n, int k, int lda, int count, cudaDataType_t type) {
    ok_ = make(a_, type, k, m, lda, count) && make(b_, type, k, n, k, count) && make(c_, CUDA_R_32F, m, n, m, count);
  }
  ~Layouts() {
    for (cublasLtMatrixLayout_t l : {a_, b_, c_})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }
  Layouts(const Layouts&) = delete;
  Layouts& operator=(const Layouts&) = delete;
  bool ok() const { return ok_; }
  cublasLtMatrixLayout_t a() const { return a_; }
  cublasLtMatrixLayout_t b() const { return b_; }
  cublasLtMatrixLayout_t c() const { return c_; }

 private:
  static bool make(cublasLtMatrixLayout_t& l, cudaDataType_t type, int rows, int cols, int ld, int count) {
    if (cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), int64_t(ld)) != CUBLAS_STATUS_SUCCESS)
      return false;
    const uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
    const int32_t batch = count;
    return cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof(mode)) ==
               CUBLAS_STATUS_SUCCESS &&
           cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)) ==
               CUBLAS_STATUS_SUCCESS;
  }
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  bool ok_ = false;
};

// The class of a row count: the next power of two (at least 16), so a plan serves every count up to
// twice the one before.
int64_t row_class(int n) { return std::max<int64_t>(16, int64_t(std::bit_ceil(unsigned(n)))); }

}  // namespace

std::unique_ptr<LtBatchedGemm> LtBatchedGemm::create(std::string& why) {
  auto g = std::make_unique<LtBatchedGemm>();
  if (cublasLtCreate(&g->lt_) != CUBLAS_STATUS_SUCCESS) {
    why = "cuBLASLt could not start";
    return nullptr;
  }
  if (cublasLtMatmulDescCreate(&g->op_, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) {
    why = "cuBLASLt: no matmul descriptor";
    return nullptr;
  }
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (cudaMalloc(&g->workspace_, kWorkspaceBytes) != cudaSuccess) {
    cudaGetLastError();
    why = "no GPU memory for cuBLASLt's workspace";
    return nullptr;
  }
  g->workspace_bytes_ = kWorkspaceBytes;
  return g;
}

LtBatchedGemm::~LtBatchedGemm() {
  if (workspace_) cudaFree(workspace_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (lt_) cublasLtDestroy(lt_);
}

const LtBatchedGemm::Plan& LtBatchedGemm::plan(const Key& key, int count) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  const Layouts l{int(key[0]), int(key[3]), int(key[1]), int(key[2]), count, cudaDataType_t(key[6])};
  cublasLtMatmulPreference_t pref = nullptr;
  if (l.ok() && cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                         sizeof(workspace_bytes_));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt_, op_, l.a(), l.b(), l.c(), l.c(), pref, 1, &result, &found) ==
            CUBLAS_STATUS_SUCCESS &&
        found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
      p.algo = result.algo;
      p.found = true;
    }
    cublasLtMatmulPreferenceDestroy(pref);
  }
  return plans_.emplace(key, p).first->second;
}

cublasStatus_t LtBatchedGemm::run(const void* const* w, int lda, const void* const* b, void* const* c, int m, int n,
                                  int k, int count, bool accumulate, cudaStream_t s, cudaDataType_t type) {
  const float one = 1.f, beta = accumulate ? 1.f : 0.f;
  const Layouts l{m, n, k, lda, count, type};
  // In pointer-array mode D is the device array of output pointers (cuBLASLt writes through them,
  // never into the array itself).
  void* d = const_cast<void*>(static_cast<const void*>(c));
  if (!l.ok()) return CUBLAS_STATUS_INTERNAL_ERROR;
  const auto call = [&](const Plan& p) {
    return cublasLtMatmul(lt_, op_, &one, w, l.a(), b, l.b(), &beta, c, l.c(), d, l.c(), &p.algo, workspace_,
                          workspace_bytes_, s);
  };
  // The class's plan first; where it does not take this shape, one for the shape itself.
  const Plan& cls = plan({m, k, lda, row_class(n), accumulate ? 1 : 0, 0, int64_t(type)}, count);
  if (cls.found) {
    if (const cublasStatus_t st = call(cls); st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE)
      return st;
  }
  const Plan& exact = plan({m, k, lda, n, accumulate ? 1 : 0, 1, int64_t(type)}, count);
  if (!exact.found) return CUBLAS_STATUS_NOT_SUPPORTED;
  return call(exact);
}

bool lt_batched_gemm_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("FT_CUDA_GEMM");
    return !(env && std::strcmp(env, "batched") == 0);
  }();
  return on;
}

}  // namespace ft::engine::cuda
