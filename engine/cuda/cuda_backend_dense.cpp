// Dense products and elementwise ops: cuBLAS GEMMs on bf16/f16 weights, block-dtype products
// (decode kernels, or planes decoded to bf16 tiles for prefill), norms, sampling.
#include <optional>

#include "cuda_backend.h"

namespace ft::engine {

void CudaBackend::embedding(const Matrix& table, std::span<const int32_t> ids, float* out) {
  Timed timer(this, OpProfile::kEmbedding);
  const int32_t* dev_ids = upload(ids.data(), ids.size());
  if (replaying()) return;
  if (cuda::is_block_dtype(table.dtype)) {
    cuda::embedding_blocks(weight(table), table.dtype, table.row_bytes, table.cols, dev_ids, int(ids.size()), out, s());
    return;
  }
  cuda::embedding(weight(table), table.dtype, table.row_bytes, table.cols, dev_ids, int(ids.size()), out, s());
}

void CudaBackend::linear(const float* x, std::size_t T, const Matrix& w, const float* bias, float* y) {
  const LinearOut one[] = {{&w, bias, y}};
  linears(x, T, one);
}

void CudaBackend::linears(const float* x, std::size_t T, std::span<const LinearOut> outs) {
  Timed timer(this, OpProfile::kLinear);
  if (T == 0 || outs.empty() || replaying()) return;
  Scratch::Frame frame(scratch_);
  const std::size_t K = std::size_t(outs[0].w->cols);
  const std::uint16_t* split[2] = {nullptr, nullptr};  // bf16, f16
  const std::uint16_t* x16 = nullptr;                  // one fp16 plane, for f16 block products
  const bool f16 = cuda::f16_block_products(cuda::BlockProducts::kDense);  // read once for every product here
  // Decode: the bf16 products read their weights once with fp32 activations, no split, all in
  // one launch.
  // fp32 weights (a GGUF's shared-expert gate) join them: a warp group a row. Block-dtype products
  // read in units go out in one launch per dtype.
  cuda::GemvOut gemv[cuda::kGemvMaxOuts];
  int n_gemv = 0;
  std::vector<std::pair<DType, std::vector<cuda::GemvOut>>> units;
  std::vector<const LinearOut*> rest;
  const bool decode = T <= std::size_t(cuda::kGemvMaxRows);
  for (const LinearOut& o : outs) {
    const DType dt = o.w->dtype;
    const std::byte* w = weight(*o.w);
    if (decode && n_gemv < cuda::kGemvMaxOuts && (dt == DType::kBF16 || dt == DType::kF32) &&
        cuda::gemv_fits(w, o.w->row_bytes, o.w->cols)) {
      gemv[n_gemv++] = {w, o.w->row_bytes, int(o.w->rows), o.bias, o.y, dt == DType::kF32};
    } else if (decode && cuda::units_fit(dt, w, o.w->row_bytes, int(o.w->cols))) {
      auto it = std::find_if(units.begin(), units.end(), [&](const auto& u) {
        return u.first == dt && u.second.size() < std::size_t(cuda::kGemvMaxOuts);
      });
      if (it == units.end()) it = units.insert(units.end(), {dt, {}});
      it->second.push_back({w, o.w->row_bytes, int(o.w->rows), o.bias, o.y});
    } else {
      rest.push_back(&o);
    }
  }
  if (n_gemv) cuda::gemv_bf16(gemv, n_gemv, int(K), x, int(T), s());
  // The integer products read x as int8 planes, quantised once for all of them.
  const bool any_int8 =
      std::any_of(units.begin(), units.end(), [](const auto& u) { return cuda::int8_products(u.first); });
  const cuda::X8 xq = any_int8 ? quantize_x8(x, T, K) : cuda::X8{};
  for (const auto& [dt, u] : units)
    cuda::gemv_units_batch(u.data(), int(u.size()), dt, int(K), x, int(T), s(),
                           cuda::int8_products(dt) ? &xq : nullptr);
  std::optional<cuda::X8> slots_q;  // x's int8 planes in whole slots, for block_mma_linear
  for (const LinearOut* op : rest) {
    const LinearOut& o = *op;
    const DType dt = o.w->dtype;
    if (cuda::is_block_dtype(dt)) {
      if (!decode && cuda::units_fit(dt, weight(*o.w), o.w->row_bytes, int(K)) &&
          cuda::block_mma_fits(dt, int(o.w->rows), int(K))) {
        if (!slots_q) slots_q = quantize_x8_slots(x, T, K);
        block_mma_linear(*slots_q, T, o);
        continue;
      }
      if (T > std::size_t(cuda::kGemvMaxRows)) {
        if (f16 && !x16) {
          auto* buf = scratch_.take<std::uint16_t>(T * K);
          cuda::round_f16(x, T * K, buf, s());
          x16 = buf;
        } else if (!f16 && !split[0]) {
          auto* buf = scratch_.take<std::uint16_t>(2 * T * K);
          cuda::split_16(x, T * K, T * K, false, buf, s());
          split[0] = buf;
        }
      }
      block_product(x, f16 ? x16 : split[0], T, o, f16);
      continue;
    }
    if (dt == DType::kF32) {
      gemm(x, T, *o.w, o.y, 0.f);
      if (o.bias) cuda::add_bias(o.y, o.bias, int(T), int(o.w->rows), s());
      continue;
    }
    const bool f16 = dt == DType::kF16;
    if (!split[f16]) {
      auto* buf = scratch_.take<std::uint16_t>(2 * T * K);
      cuda::split_16(x, T * K, T * K, f16, buf, s());
      split[f16] = buf;
    }
    if (T <= kOneGemmTokens) {
      // Few rows: the product streams the weights, so one GEMM over both halves (2T columns)
      // reads them once; the halves are added after.
      Scratch::Frame inner(scratch_);
      float* y2 = scratch_.floats(2 * T * std::size_t(o.w->rows));
      gemm(split[f16], 2 * T, *o.w, y2, 0.f);
      cuda::add_halves(y2, int(T), int(o.w->rows), o.bias, o.y, s());
    } else {
      // Many: the product is compute-bound; y = W hi, then y += W lo in the second GEMM's
      // epilogue spares a pass over a 2T-row output.
      gemm(split[f16], T, *o.w, o.y, 0.f);
      gemm(split[f16] + T * K, T, *o.w, o.y, 1.f);
      if (o.bias) cuda::add_bias(o.y, o.bias, int(T), int(o.w->rows), s());
    }
  }
}

void CudaBackend::rms_norm(const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim,
                           float eps, bool zero_centered) {
  Timed timer(this, OpProfile::kNorm);
  if (replaying()) return;
  cuda::rms_norm(x, weight, out, int(rows), int(dim), eps, zero_centered, s());
}

void CudaBackend::add_rms_norm(float* hidden, const float* delta, const float* weight, float* out, std::size_t rows,
                               std::size_t dim, float eps, bool zero_centered) {
  Timed timer(this, OpProfile::kNorm);
  if (replaying()) return;
  cuda::add_rms_norm(hidden, delta, weight, out, int(rows), int(dim), eps, zero_centered, s());
}

void CudaBackend::silu_mul(const float* gate, const float* up, float* out, std::size_t n) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::silu_mul(gate, up, out, n, s());
}

void CudaBackend::gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::gelu_tanh_mul(gate, up, out, n, s());
}

void CudaBackend::scale(float* x, std::size_t n, float factor) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::scale(x, n, factor, s());
}

void CudaBackend::softcap(float* x, std::size_t n, float cap) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::softcap(x, n, cap, s());
}

void CudaBackend::mul_sigmoid(float* x, const float* gate, std::size_t n) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::mul_sigmoid(x, gate, n, s());
}

void CudaBackend::scale_by_top_sigmoid(const float* x, const float* logits, std::size_t T, std::size_t width,
                                       std::size_t E, float* out) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::scale_by_top_sigmoid(x, logits, int(T), int(width), int(E), out, s());
}

void CudaBackend::attention_temperature(float* x, std::size_t T, std::size_t width, const int64_t* positions,
                                        float floor_scale, float attn_scale) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::attention_temperature(x, int(T), int(width), positions, floor_scale, attn_scale, s());
}

void CudaBackend::add(float* y, const float* x, std::size_t n) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::add(y, x, n, s());
}

void CudaBackend::gather_rows(const float* src, std::span<const std::size_t> rows, std::size_t width, float* dst) {
  std::vector<int64_t> r(rows.begin(), rows.end());
  const int64_t* dev_rows = upload(r.data(), r.size());
  if (replaying()) return;
  cuda::gather_rows(src, dev_rows, int(r.size()), int(width), dst, s());
}

void CudaBackend::copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                               std::size_t rows, std::size_t width) {
  Timed timer(this, OpProfile::kElementwise);
  if (replaying()) return;
  cuda::copy_columns(src, src_ld, repeat, dst, dst_ld, rows, width, s());
}

void CudaBackend::to_host(const float* src, std::size_t n, float* dst) {
  if (!issued_) issued_ = std::chrono::steady_clock::now();
  if (mode_ != cuda::PassGraphs::Mode::kRun) {
    // Recorded or replayed: into pinned memory with the pass, to `dst` once it is done.
    auto pinned = pass_host_.take(n * sizeof(float));
    if (!pinned) throw std::bad_alloc();
    if (mode_ == cuda::PassGraphs::Mode::kRecord)
      check(cudaMemcpyAsync(*pinned, src, n * sizeof(float), cudaMemcpyDeviceToHost, s()), "copying to the host");
    graphs_.log_copy(dst, *pinned, n * sizeof(float));
    return;
  }
  check(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, s()), "copying to the host");
  check(cudaStreamSynchronize(s()), "copying to the host");
}

void CudaBackend::sample(const float* logits, std::size_t vocab, std::span<const std::size_t> rows,
                         std::span<const SampleRequest> requests, std::span<int32_t* const> tokens) {
  const std::size_t n = requests.size();
  if (n == 0) return;
  std::vector<cuda::SampleRowDev> params(n);
  for (std::size_t i = 0; i < n; ++i) {
    const SamplingParams& p = requests[i].params;
    params[i] = {int(rows[i]), p.temperature, p.top_k, p.top_p, p.min_p, p.greedy ? 1 : 0, requests[i].u};
  }
  const cuda::SampleRowDev* dev = upload(params.data(), n);
  auto* picked = scratch_.take<int32_t>(n);
  auto pinned = pass_host_.take(n * sizeof(int32_t));
  if (!pinned) throw std::bad_alloc();
  const auto* host = reinterpret_cast<const int32_t*>(*pinned);
  if (!replaying()) {
    cuda::sample_rows(logits, int(n), int(vocab), dev, picked, s());
    check(cudaMemcpyAsync(*pinned, picked, n * sizeof(int32_t), cudaMemcpyDeviceToHost, s()), "copying tokens");
  }
  if (mode_ == cuda::PassGraphs::Mode::kRun) {
    if (!issued_) issued_ = std::chrono::steady_clock::now();
    check(cudaStreamSynchronize(s()), "copying tokens");
    for (std::size_t i = 0; i < n; ++i) *tokens[i] = host[i];
    return;
  }
  for (std::size_t i = 0; i < n; ++i) graphs_.log_copy(tokens[i], host + i, sizeof(int32_t));
}

cuda::X8 CudaBackend::quantize_x8_slots(const float* x, std::size_t T, std::size_t cols) {
  const std::size_t P = (T + kSlotRows - 1) / kSlotRows * kSlotRows;
  const cuda::X8Out planes =
      cuda::x8_planes(scratch_.take<std::byte>(cuda::x8_bytes(int(P), int(cols))), int(P), int(cols));
  cuda::quantize_x8_into(x, int(T), int(cols), planes, s());
  // The rows past T: zeros.
  const std::size_t done = T * cols, pad = (P - T) * cols;
  check(cudaMemsetAsync(planes.hi + done, 0, pad, s()), "quantising");
  check(cudaMemsetAsync(planes.lo + done, 0, pad, s()), "quantising");
  check(cudaMemsetAsync(planes.meta + done / 32, 0, pad / 32 * sizeof(float4), s()), "quantising");
  return cuda::x8_rows(planes, 0, int(cols));
}

void CudaBackend::block_mma_linear(const cuda::X8& xq, std::size_t T, const LinearOut& o) {
  const Matrix& w = *o.w;
  const std::size_t slots = (T + kSlotRows - 1) / kSlotRows;
  const std::vector<const void*> ws(slots, weight(w));
  const auto* dev = reinterpret_cast<const std::byte* const*>(upload(ws.data(), ws.size()));
  {
    const GemmTimer timer(this, {w.rows, int64_t(T), w.cols, 0, int64_t(w.row_bytes), 2});
    cuda::block_mma_products(dev, int(slots), w.dtype, w.row_bytes, int(w.rows), int(w.cols), xq, int(T), o.y,
                             kSlotRows * std::size_t(w.rows), s());
  }
  if (o.bias) cuda::add_bias(o.y, o.bias, int(T), int(w.rows), s());
}

void CudaBackend::block_product(const float* x, const std::uint16_t* xs, std::size_t T, const LinearOut& o, bool f16) {
  const Matrix& w = *o.w;
  const std::size_t R = std::size_t(w.rows), K = std::size_t(w.cols);
  if (T <= std::size_t(cuda::kGemvMaxRows)) {
    cuda::gemv_blocks(weight(w), w.dtype, w.row_bytes, int(R), int(K), x, int(T), o.bias, o.y, s());
    return;
  }
  Scratch::Frame frame(scratch_);
  if (f16) {
    const std::size_t tile = std::max<std::size_t>(64, std::min(R, tile_bytes() / (2 * K)));
    auto* plane = scratch_.take<std::uint16_t>(tile * K);
    for (std::size_t r0 = 0; r0 < R; r0 += tile) {
      const std::size_t n = std::min(tile, R - r0);
      cuda::dequant_f16_rows(weight(w) + r0 * w.row_bytes, w.dtype, w.row_bytes, int(n), int(K), plane, s());
      gemm_16(xs, T, K, plane, n, o.y + r0, R, 0.f, CUDA_R_16F);
    }
    if (o.bias) cuda::add_bias(o.y, o.bias, int(T), int(R), s());
    return;
  }
  const std::size_t tile = std::max<std::size_t>(64, std::min(R, tile_bytes() / (4 * K)));
  auto* hi = scratch_.take<std::uint16_t>(2 * tile * K);
  std::uint16_t* lo = hi + tile * K;
  for (std::size_t r0 = 0; r0 < R; r0 += tile) {
    const std::size_t n = std::min(tile, R - r0);
    cuda::dequant_split_rows(weight(w) + r0 * w.row_bytes, w.dtype, w.row_bytes, int(n), int(K), hi, lo, s());
    gemm_16(xs, T, K, hi, n, o.y + r0, R, 0.f);
    gemm_16(xs + T * K, T, K, hi, n, o.y + r0, R, 1.f);
    gemm_16(xs, T, K, lo, n, o.y + r0, R, 1.f);
  }
  if (o.bias) cuda::add_bias(o.y, o.bias, int(T), int(R), s());
}

void CudaBackend::gemm_16(const std::uint16_t* x, std::size_t T, std::size_t K, const std::uint16_t* w, std::size_t n,
                          float* y, std::size_t ldy, float beta, cudaDataType_t type) {
  const float one = 1.f;
  const GemmTimer timer(this, {int64_t(n), int64_t(T), int64_t(K), 0, int64_t(ldy), beta != 0 ? 1 : 0});
  const cublasStatus_t st =
      cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(T), int(K), &one, w, type, int(K), x, type, int(K),
                   &beta, y, CUDA_R_32F, int(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) fail(std::string("cublasGemmEx: ") + cublas_status_text(st));
}

void CudaBackend::gemm(const void* x, std::size_t T, const Matrix& w, float* y, float beta) {
  const float one = 1.f;
  const std::size_t elem = dtype_size(w.dtype);
  const int m = int(w.rows), n = int(T), k = int(w.cols), lda = int(w.row_bytes / elem);
  const cudaDataType_t type = w.dtype == DType::kBF16 ? CUDA_R_16BF : w.dtype == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
  const GemmTimer timer(this, {m, n, k, -int64_t(type) - 1, lda, beta != 0 ? 1 : 0});
  const cublasStatus_t st = cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, weight(w), type, lda, x, type,
                                         k, &beta, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) fail(std::string("cublasGemmEx: ") + cublas_status_text(st));
}

}  // namespace ft::engine
