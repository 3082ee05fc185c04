#include "ft/engine/backend.h"

#include <cstdio>
#include <cstdlib>

#include "backend/cpu_backend.h"
#include "backend/cuda_factory.h"
#include "backend/reference_backend.h"

namespace ft::engine {

const char* backend_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::kReference: return "reference";
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kCuda: return "cuda";
  }
  return "?";
}

const char* OpProfile::name(Kind k) {
  static const char* const kNames[kCount] = {"linear",   "moe",     "attention",   "kv_write",  "deltanet",
                                             "rms_norm", "rope",    "elementwise", "embedding", "route",
                                             "experts",  "combine", "expert_gemms"};
  return k < kCount ? kNames[k] : "?";
}

namespace {

// A model whose layers need an op the backend lacks is refused at load (has_sparse_attention,
// has_v4_ops), so reaching one of these is a bug, not a user error.
[[noreturn]] void missing_op(const char* op) {
  std::fprintf(stderr, "freetoken: internal error: the %s op is not implemented by this backend\n", op);
  std::abort();
}

}  // namespace

void Backend::layer_norm(const float*, const float*, const float*, float*, std::size_t, std::size_t, float) {
  missing_op("layer_norm");
}

void Backend::index_select(const KvLayout&, int64_t, const float*, const float*, const IndexerSpec&,
                           std::span<const AttentionSeq>, int32_t*) {
  missing_op("index_select");
}

void Backend::sparse_attention(const KvLayout&, int64_t, const float*, std::size_t, float,
                               std::span<const AttentionSeq>, const int32_t*, std::size_t, float*) {
  missing_op("sparse_attention");
}

void Backend::moe_chosen(const MoeWeights&, const float*, std::size_t, const int32_t*, float*) {
  missing_op("moe_chosen");
}

void Backend::expert_glu(const ref::ExpertGlu&, const float*, const float*, float*, std::size_t) {
  missing_op("expert_glu");
}

void Backend::hc_pre(const float*, const float*, const float*, const float*, std::size_t, const HyperSpec&, float*,
                     float*, float*) {
  missing_op("hc_pre");
}

void Backend::hc_post(const float*, const float*, const float*, const float*, std::size_t, const HyperSpec&, float*) {
  missing_op("hc_post");
}

void Backend::hc_head(const float*, const float*, const float*, const float*, std::size_t, const HyperSpec&, float*) {
  missing_op("hc_head");
}

void Backend::v4_compress(const CompressorSpec&, const CompressorParams&, const float*, const float*,
                          std::span<const CompressorSeq>, float*) {
  missing_op("v4_compress");
}

void Backend::v4_index_select(const KvLayout&, int64_t, const float*, const float*, const IndexerSpec&, std::size_t,
                              std::span<const AttentionSeq>, int32_t*) {
  missing_op("v4_index_select");
}

void Backend::v4_attention(const KvLayout&, int64_t, const float*, const V4AttentionSpec&, const float*, const float*,
                           std::span<const AttentionSeq>, const int32_t*, std::size_t, float*) {
  missing_op("v4_attention");
}

Result<BackendKind> parse_backend(std::string_view name) {
  for (BackendKind k : {BackendKind::kReference, BackendKind::kCpu, BackendKind::kCuda}) {
    if (name == backend_name(k)) return k;
  }
  return invalid_argument("unknown backend '" + std::string(name) + "' (reference, cpu, cuda)");
}

Result<std::unique_ptr<Backend>> make_backend(const BackendOptions& options) {
  if (options.threads < 0) return invalid_argument("threads must be >= 0");
  switch (options.kind) {
    case BackendKind::kReference: return std::unique_ptr<Backend>(std::make_unique<ReferenceBackend>(options.threads));
    case BackendKind::kCpu:
      if (options.cpu_isa && !cpu_isa_supported(*options.cpu_isa))
        return unsupported(std::string("this CPU cannot run the ") + cpu_isa_name(*options.cpu_isa) + " kernels");
      return std::unique_ptr<Backend>(
          std::make_unique<CpuBackend>(options.threads, options.cpu_isa.value_or(best_cpu_isa()), options.deterministic,
                                       options.cpu_bf16_activations));
    case BackendKind::kCuda: return make_cuda_backend(options);
  }
  return invalid_argument("unknown backend");
}

}  // namespace ft::engine
