// Mixture of experts with every expert in VRAM: the router, decode kernels per (token, choice),
// prefill as grouped GEMMs over the tokens of each expert.
#include "cuda_backend.h"

namespace ft::engine {

void CudaBackend::moe(const MoeWeights& w, const float* x, std::size_t T, float* out, const float* router_x) {
  Timed timer(this, OpProfile::kMoe);
  const std::size_t E = w.router_spec.num_experts, K = w.router_spec.top_k;
  if (replaying()) {
    // A replayed pass is a decode step: its MoE uploads nothing; a routing trace it records is
    // copied out by the graph into the pinned buffer it had when recorded (the same take here).
    if (trace_) trace_later(nullptr, T, K);
    // Misses read in place: the recorded copy of the choices lands where it did when recorded.
    if (offload_ && offload_->in_place() && T <= kFusedMoeTokens) {
      const int layer = offload_->layer_of(w);
      offload_->note_in_place(layer, int(T * K));
      if (offload_->cpu_share()) offload_->queue_cpu_share(layer, int(T), int(K));
    }
    return;
  }
  Scratch::Frame frame(scratch_);
  if (K > 32 || E > 8192) return fail("the GPU router takes at most 8192 experts and 32 choices a token");
  // DeepSeek-V4's sqrt-softplus scores: routed on the host.
  if (w.router_spec.scoring == ref::RouterScoring::kSqrtSoftplus)
    return moe_host_routed(w, x, router_x ? router_x : x, T, nullptr, out);
  if (w.router_spec.grouped() && w.router_spec.n_group > std::size_t(cuda::kRouteMaxGroups))
    return fail("the GPU's grouped router takes at most " + std::to_string(cuda::kRouteMaxGroups) + " expert groups");
  const float* rx = router_x ? router_x : x;
  // Experts whose rows the fused kernels cannot load go expert by expert, with the choices on the
  // host.
  if (!offload_ && !expert_table(w)) return moe_expert_by_expert(w, x, rx, T, out);
  if (offload_) return moe_offloaded(w, x, rx, T, out);
  std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeRoute, true);
  const cuda::ExpertTable* table = T <= kFusedMoeTokens ? expert_table(w) : nullptr;
  const cuda::RouteSpec route = route_tokens(w, rx, T, table != nullptr);  // by expert: the down kernel's view
  const int32_t* chosen_dev = route.chosen;
  const float* weights_dev = route.weights;
  if (table) {
    // A few tokens: the choices stay on the GPU; two kernels read each chosen expert's rows.
    if (trace_) trace_later(chosen_dev, T, K);
    phase.emplace(this, OpProfile::kMoeExperts, true);
    float* h = scratch_.floats(T * K * std::size_t(table->inter));
    // Pair by pair: an expert two tokens chose is read from memory once and then from L2 (grouping
    // the pairs by expert measured no faster at 16 tokens).
    experts_decode(*table, x, T, K, chosen_dev, h, route.by_expert, out);
    phase.emplace(this, OpProfile::kMoeCombine, true);
    add_shared_expert(w, x, T, out);
    return;
  }
  // Prefill-sized: the choices are grouped by expert on the device; only each expert's row count
  // comes to the host (the layer's one synchronisation), to size the GEMMs.
  if (trace_) trace_later(chosen_dev, T, K);
  const std::span<const int32_t> counts = expert_counts(chosen_dev, T * K, E);
  if (!failure_.empty()) return;

  phase.emplace(this, OpProfile::kMoeExperts, true);  // the experts' products and their combine
  if (const cuda::ExpertTable* table = expert_table(w)) {
    experts_batched(*table, w, x, T, K, counts, chosen_dev, weights_dev, out);
  } else {
    experts_one_by_one(w, x, T, K, chosen_dev, weights_dev, out);
  }
  phase.emplace(this, OpProfile::kMoeCombine, true);
  add_shared_expert(w, x, T, out);
}

void CudaBackend::moe_expert_by_expert(const MoeWeights& w, const float* x, const float* router_x, std::size_t T,
                                       float* out) {
  if (mode_ != cuda::PassGraphs::Mode::kRun) return fail("a MoE expert by expert cannot be recorded as a graph");
  host_synced_ = true;
  std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeRoute, true);
  const std::size_t K = w.router_spec.top_k;
  const cuda::RouteSpec route = route_tokens(w, router_x, T, false);
  if (trace_) trace_later(route.chosen, T, K);
  phase.emplace(this, OpProfile::kMoeExperts, true);
  experts_one_by_one(w, x, T, K, route.chosen, route.weights, out);
  phase.emplace(this, OpProfile::kMoeCombine, true);
  add_shared_expert(w, x, T, out);
}

cuda::X8 CudaBackend::quantize_x8(const float* x, std::size_t T, std::size_t cols) {
  auto* buf = scratch_.take<std::byte>(cuda::x8_bytes(int(T), int(cols)));
  return cuda::quantize_x8(x, int(T), int(cols), buf, s());
}

void CudaBackend::experts_decode(const cuda::ExpertTable& table, const float* x, std::size_t T, std::size_t K,
                                 const int32_t* chosen, float* h, const cuda::ChoicesByExpert& by_expert, float* out) {
  cuda::X8 xq, hq;
  const bool gate_up_q = table.gate_up_units && cuda::int8_products(table.gate_up_dtype);
  const bool down_q = table.down_units && cuda::int8_products(table.down_dtype);
  if (gate_up_q) xq = quantize_x8(x, T, std::size_t(table.hidden));
  cuda::moe_gate_up(table, x, int(T), int(K), chosen, h, s(), gate_up_q ? &xq : nullptr);
  if (down_q) hq = quantize_x8(h, T * K, std::size_t(table.inter));
  cuda::moe_down_combine(table, h, int(T), int(K), by_expert, out, s(), down_q ? &hq : nullptr);
}

cuda::RouteSpec CudaBackend::route_tokens(const MoeWeights& w, const float* x, std::size_t T, bool by_expert,
                                          int32_t* chosen_into) {
  const std::size_t E = w.router_spec.num_experts, K = w.router_spec.top_k;
  float* logits = scratch_.floats(T * E);
  cuda::RouteSpec route;
  route.E = int(E);
  route.top_k = int(K);
  route.sigmoid = w.router_spec.scoring == ref::RouterScoring::kSigmoid;
  route.renormalize = w.router_spec.renormalize;
  route.scaling = w.router_spec.scaling;
  route.grouped = w.router_spec.grouped();
  route.n_group = int(w.router_spec.n_group);
  route.topk_group = int(w.router_spec.topk_group);
  route.bias = w.router_spec.correction_bias;  // placed: in VRAM
  route.per_expert_scale = w.router_spec.per_expert_scale;
  route.chosen = chosen_into ? chosen_into : scratch_.take<int32_t>(T * K);
  route.weights = scratch_.floats(T * K);
  if (by_expert)
    route.by_expert = {scratch_.take<int32_t>(T * K), scratch_.take<int32_t>(T * K), scratch_.floats(T * K)};
  // A bf16 router, or an fp32 one (GGUF keeps routers unquantised) with 16-byte rows.
  const bool f32 = w.router.dtype == DType::kF32 && w.router.row_bytes % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(w.router.device) % 16 == 0 && w.router.cols % 4 == 0;
  if (!w.router_bias && T <= std::size_t(cuda::kGemvMaxRows) &&
      (f32 ||
       (w.router.dtype == DType::kBF16 && cuda::gemv_fits(weight(w.router), w.router.row_bytes, w.router.cols))) &&
      zeroed_counters(route_done_, 1)) {
    const cuda::GemvOut router{weight(w.router), w.router.row_bytes, int(E), nullptr, logits, f32};
    cuda::gemv_route(router, int(w.router.cols), x, int(T), route, route_done_, s());
  } else {
    linear(x, T, w.router, w.router_bias, logits);
    cuda::route_top_k(logits, int(T), route, s());
  }
  return route;
}

std::span<const int32_t> CudaBackend::expert_counts(const int32_t* chosen_dev, std::size_t n, std::size_t E) {
  auto* counts_dev = scratch_.take<int32_t>(E);
  check(cudaMemsetAsync(counts_dev, 0, E * sizeof(int32_t), s()), "routing");
  cuda::moe_count(chosen_dev, int(n), counts_dev, s());
  auto counts_pinned = pass_host_.take(E * sizeof(int32_t));
  if (!counts_pinned) throw std::bad_alloc();
  check(cudaMemcpyAsync(*counts_pinned, counts_dev, E * sizeof(int32_t), cudaMemcpyDeviceToHost, s()), "routing");
  wait_mid_pass("routing");
  if (!failure_.empty()) return {};
  return {reinterpret_cast<const int32_t*>(*counts_pinned), E};
}

void CudaBackend::experts_batched(const cuda::ExpertTable& dims, const MoeWeights& w, const float* x, std::size_t T,
                                  std::size_t K, std::span<const int32_t> counts, const int32_t* chosen_dev,
                                  const float* weights_dev, float* out, std::size_t round_experts,
                                  const Resolve& resolve, const RoundDone& round_done) {
  const std::size_t E = w.experts.size(), H = std::size_t(dims.hidden), I = std::size_t(dims.inter);
  constexpr std::size_t C = kSlotRows;
  struct Round {
    std::size_t row0 = 0, slots = 0;
    std::vector<int32_t> experts, slot_counts;
  };
  std::vector<Round> rounds;
  std::vector<int32_t> row0(E, 0);  // expert -> its first padded row
  std::size_t R = 0;                // padded rows in all
  for (std::size_t e = 0; e < E; ++e) {
    if (counts[e] <= 0) continue;
    if (rounds.empty() || rounds.back().experts.size() >= round_experts) rounds.push_back({R, 0, {}, {}});
    Round& r = rounds.back();
    const std::size_t n = (std::size_t(counts[e]) + C - 1) / C;
    row0[e] = int32_t(R);
    R += n * C;
    r.slots += n;
    r.experts.push_back(int32_t(e));
    r.slot_counts.push_back(int32_t(n));
  }
  auto* cursor = scratch_.take<int32_t>(E);
  auto* padded = scratch_.take<int64_t>(R);
  auto* rows = scratch_.take<int32_t>(T * K);
  float* sorted_weights = scratch_.floats(T * K);
  check(cudaMemsetAsync(cursor, 0, E * sizeof(int32_t), s()), "grouping");
  check(cudaMemsetAsync(padded, 0xff, R * sizeof(int64_t), s()), "grouping");  // -1: a padding row
  cuda::moe_scatter(chosen_dev, weights_dev, int(T), int(K), upload(row0.data(), E), cursor, padded, rows,
                    sorted_weights, s());
  // Products on GGUF blocks with integer codes take the int8 tensor-core kernel (block_mma_products)
  // where FT_CUDA_MMA is on: its inputs are int8 planes (gathered and quantised in one pass; the GLU
  // quantised), its outputs fp32 rows [R, width] in one part. With cuda::f16_block_products, GGUF
  // blocks are one GEMM on fp16 planes: inputs fp16 rows (gathered, the GLU rounded), outputs one
  // part too. The others are GEMMs over bf16 halves: their inputs are gathered and split (and
  // GLU'd) in one pass each, straight into the slots' layout, and their products fp32 in the same
  // layout, two parts a row.
  const bool mma_gate_up = dims.gate_up_units && cuda::block_mma_fits(dims.gate_up_dtype, int(I), int(H));
  const bool mma_down = dims.down_units && cuda::block_mma_fits(dims.down_dtype, int(H), int(I));
  const bool f16 = cuda::f16_block_products(cuda::BlockProducts::kExperts);
  const bool f16_gate_up = !mma_gate_up && f16 && cuda::is_block_dtype(dims.gate_up_dtype);
  const bool f16_down = !mma_down && f16 && cuda::is_block_dtype(dims.down_dtype);
  const std::size_t gu_parts = mma_gate_up || f16_gate_up ? 1 : 2, down_parts = mma_down || f16_down ? 1 : 2;
  Scratch::Frame frame(scratch_);
  float* y = scratch_.floats(down_parts * R * H);
  float* g = scratch_.floats(gu_parts * R * I);
  float* u = scratch_.floats(gu_parts * R * I);
  std::uint16_t* xs = mma_gate_up ? nullptr : scratch_.take<std::uint16_t>((f16_gate_up ? 1 : 2) * R * H);
  std::uint16_t* hs = mma_down ? nullptr : scratch_.take<std::uint16_t>((f16_down ? 1 : 2) * R * I);
  cuda::X8Out xq, hq;
  if (mma_gate_up) {
    xq = cuda::x8_planes(scratch_.take<std::byte>(cuda::x8_bytes(int(R), int(H))), int(R), int(H));
    cuda::quantize_x8_gather(x, padded, int(R), int(H), xq, s());
  } else if (f16_gate_up) {
    cuda::gather_f16(x, padded, int(R), int(H), xs, s());
  } else {
    cuda::gather_split(x, padded, int(R), int(H), int(C), xs, s());
  }
  if (mma_down) hq = cuda::x8_planes(scratch_.take<std::byte>(cuda::x8_bytes(int(R), int(I))), int(R), int(I));
  for (const Round& r : rounds) {
    std::vector<cuda::ExpertPtrs> where;
    if (resolve) {
      where = resolve(r.experts);
      if (where.size() != r.experts.size()) return;  // failed (the pass reports it)
    } else {
      for (int32_t e : r.experts) {
        const SwiGluMatrices& m = w.experts[std::size_t(e)];
        where.push_back({m.gate.device, m.up.device, m.down.device});
      }
    }
    // Slot by slot: its expert's matrices, and the expert (for the biases).
    std::vector<const void*> gate, up, down;
    std::vector<int32_t> slot_experts;
    for (std::size_t j = 0; j < r.experts.size(); ++j) {
      for (int32_t k = 0; k < r.slot_counts[j]; ++k) {
        gate.push_back(where[j].gate);
        up.push_back(where[j].up);
        down.push_back(where[j].down);
        slot_experts.push_back(r.experts[j]);
      }
    }
    const std::size_t rows_here = r.slots * C;
    float* g_here = g + gu_parts * r.row0 * I;
    float* u_here = u + gu_parts * r.row0 * I;
    float* y_here = y + down_parts * r.row0 * H;
    {
      const Timed timer(this, OpProfile::kMoeGemms, true);
      if (mma_gate_up) {
        const cuda::X8 in = cuda::x8_rows(xq, int(r.row0), int(H));
        mma_products(gate, dims.gate_up_dtype, dims.gate_up_row_bytes, int(I), int(H), in, g_here);
        mma_products(up, dims.gate_up_dtype, dims.gate_up_row_bytes, int(I), int(H), in, u_here);
      } else if (f16_gate_up) {
        const std::uint16_t* in = xs + r.row0 * H;
        f16_gemms(gate, dims.gate_up_dtype, dims.gate_up_row_bytes, int(I), int(H), in, g_here);
        f16_gemms(up, dims.gate_up_dtype, dims.gate_up_row_bytes, int(I), int(H), in, u_here);
      } else {
        const std::uint16_t* in = xs + 2 * r.row0 * H;
        split_gemms(gate, dims.gate_up_dtype, dims.gate_up_row_bytes, int(I), int(H), in, 2 * C * H, C, g_here,
                    2 * C * I);
        split_gemms(up, dims.gate_up_dtype, dims.gate_up_row_bytes, int(I), int(H), in, 2 * C * H, C, u_here,
                    2 * C * I);
      }
    }
    const int32_t* experts_dev = dims.act.biased() ? upload(slot_experts.data(), slot_experts.size()) : nullptr;
    if (mma_down) {
      const cuda::X8Out h_here{hq.hi + r.row0 * I, hq.lo + r.row0 * I, hq.meta + r.row0 * I / 32};
      cuda::glu_x8(g_here, u_here, int(rows_here), int(I), dims.act, experts_dev, int(C), int(gu_parts), h_here, s());
    } else if (f16_down) {
      cuda::glu_f16(g_here, u_here, int(rows_here), int(I), dims.act, experts_dev, int(C), int(gu_parts),
                    hs + r.row0 * I, s());
    } else {
      cuda::glu_split(g_here, u_here, int(rows_here), int(I), dims.act, experts_dev, int(C), int(gu_parts),
                      hs + 2 * r.row0 * I, s());
    }
    {
      const Timed timer(this, OpProfile::kMoeGemms, true);
      if (mma_down) {
        mma_products(down, dims.down_dtype, dims.down_row_bytes, int(H), int(I), cuda::x8_rows(hq, int(r.row0), int(I)),
                     y_here);
      } else if (f16_down) {
        f16_gemms(down, dims.down_dtype, dims.down_row_bytes, int(H), int(I), hs + r.row0 * I, y_here);
      } else {
        split_gemms(down, dims.down_dtype, dims.down_row_bytes, int(H), int(I), hs + 2 * r.row0 * I, 2 * C * I, C,
                    y_here, 2 * C * H);
      }
    }
    cuda::add_expert_bias(y_here, int(rows_here), int(H), dims.act.down_bias, experts_dev, int(C), int(down_parts),
                          s());
    if (round_done) round_done();
  }
  cuda::moe_combine_split(y, rows, sorted_weights, int(T), int(K), int(H), down_parts == 1 ? 0 : int(C), out, s());
}

void CudaBackend::mma_products(const std::vector<const void*>& ws, DType dtype, std::size_t row_bytes, int m, int k,
                               const cuda::X8& x, float* y) {
  const int slots = int(ws.size());
  const auto* dev = reinterpret_cast<const std::byte* const*>(upload(ws.data(), ws.size()));
  const GemmTimer timer(this, {m, int64_t(slots) * int64_t(kSlotRows), k, int64_t(slots), int64_t(row_bytes), 2});
  cuda::block_mma_products(dev, slots, dtype, row_bytes, m, k, x, slots * int(kSlotRows), y, kSlotRows * std::size_t(m),
                           s());
}

void CudaBackend::experts_one_by_one(const MoeWeights& w, const float* x, std::size_t T, std::size_t K,
                                     const int32_t* chosen_dev, const float* weights_dev, float* out) {
  const std::size_t E = w.experts.size(), H = std::size_t(w.hidden);
  std::vector<int32_t> chosen(T * K);
  std::vector<float> weights(T * K);
  check(cudaMemcpyAsync(chosen.data(), chosen_dev, chosen.size() * 4, cudaMemcpyDeviceToHost, s()), "routing");
  check(cudaMemcpyAsync(weights.data(), weights_dev, weights.size() * 4, cudaMemcpyDeviceToHost, s()), "routing");
  wait_mid_pass("routing");
  if (!failure_.empty()) return;

  // Rows of the grouped input, expert by expert (tokens ascending within one).
  std::vector<int32_t> count(E + 1, 0);
  for (int32_t e : chosen) ++count[std::size_t(e) + 1];
  for (std::size_t e = 0; e < E; ++e) count[e + 1] += count[e];
  std::vector<int64_t> token_of_row(T * K);
  std::vector<int32_t> row_of_choice(T * K);
  std::vector<int32_t> fill(count.begin(), count.end() - 1);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t k = 0; k < K; ++k) {
      const int32_t row = fill[std::size_t(chosen[t * K + k])]++;
      token_of_row[std::size_t(row)] = int64_t(t);
      row_of_choice[t * K + k] = row;
    }
  }
  // Each token's choices in ascending expert order: the order the CPU backends add them in.
  std::vector<std::pair<int32_t, std::size_t>> order(K);
  std::vector<int32_t> rows(K);
  std::vector<float> ws(K);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t k = 0; k < K; ++k) order[k] = {chosen[t * K + k], k};
    std::sort(order.begin(), order.end());
    for (std::size_t k = 0; k < K; ++k) {
      rows[k] = row_of_choice[t * K + order[k].second];
      ws[k] = weights[t * K + order[k].second];
    }
    std::copy(rows.begin(), rows.end(), row_of_choice.begin() + std::ptrdiff_t(t * K));
    std::copy(ws.begin(), ws.end(), weights.begin() + std::ptrdiff_t(t * K));
  }
  Scratch::Frame frame(scratch_);
  float* xg = scratch_.floats(T * K * H);
  float* y = scratch_.floats(T * K * H);
  cuda::gather_rows(x, upload(token_of_row.data(), token_of_row.size()), int(T * K), int(H), xg, s());
  for (std::size_t e = 0; e < E; ++e) {
    const std::size_t r0 = std::size_t(count[e]), n = std::size_t(count[e + 1]) - r0;
    if (n == 0) continue;
    if (w.plain_experts()) {
      swiglu(w.experts[e], xg + r0 * H, n, y + r0 * H);
    } else {
      biased_expert(w, e, xg + r0 * H, n, y + r0 * H);
    }
  }
  cuda::moe_combine(y, upload(row_of_choice.data(), row_of_choice.size()), upload(weights.data(), weights.size()),
                    int(T), int(K), int(H), out, s());
}

namespace {
// The first slot of each run of one expert's slots in `ws`, then ws.size(): an expert's slots are
// consecutive, and its matrix is decoded once for all of them.
std::vector<std::size_t> expert_runs(const std::vector<const void*>& ws) {
  std::vector<std::size_t> runs;
  for (std::size_t j = 0; j < ws.size(); ++j)
    if (j == 0 || ws[j] != ws[j - 1]) runs.push_back(j);
  runs.push_back(ws.size());
  return runs;
}
}  // namespace

void CudaBackend::split_gemms(const std::vector<const void*>& ws, DType dtype, std::size_t row_bytes, int m, int k,
                              const std::uint16_t* b, std::size_t b_stride, std::size_t n, float* c,
                              std::size_t c_stride) {
  if (dtype == DType::kBF16) {
    batched_gemm(ws.data(), row_bytes, m, k, b, b_stride, 2 * n, c, c_stride, false, ws.size());
    return;
  }
  const std::vector<std::size_t> runs = expert_runs(ws);
  const std::size_t experts = runs.size() - 1;
  Scratch::Frame frame(scratch_);
  const std::size_t plane = std::size_t(m) * std::size_t(k);
  const std::size_t per = std::clamp<std::size_t>(tile_bytes() / (4 * plane), 1, experts);
  auto* hi = scratch_.take<std::uint16_t>(2 * per * plane);
  std::uint16_t* lo = hi + per * plane;
  for (std::size_t e0 = 0; e0 < experts; e0 += per) {
    const std::size_t ne = std::min(per, experts - e0), j0 = runs[e0], j1 = runs[e0 + ne];
    std::vector<const void*> src(ne), his, los;
    for (std::size_t i = 0; i < ne; ++i) {
      src[i] = ws[runs[e0 + i]];
      for (std::size_t j = runs[e0 + i]; j < runs[e0 + i + 1]; ++j) {
        his.push_back(hi + i * plane);
        los.push_back(lo + i * plane);
      }
    }
    // One launch decodes the sub-batch: the host issuing a launch per expert set the pace.
    cuda::dequant_split_matrices(reinterpret_cast<const std::byte* const*>(upload(src.data(), ne)), int(ne), dtype,
                                 row_bytes, m, k, hi, lo, s());
    const std::uint16_t* bj = b + j0 * b_stride;
    float* cj = c + j0 * c_stride;
    const std::size_t plain = std::size_t(k) * 2;
    batched_gemm(his.data(), plain, m, k, bj, b_stride, 2 * n, cj, c_stride, false, j1 - j0);
    batched_gemm(los.data(), plain, m, k, bj, b_stride, n, cj, c_stride, true, j1 - j0);
  }
}

void CudaBackend::f16_gemms(const std::vector<const void*>& ws, DType dtype, std::size_t row_bytes, int m, int k,
                            const std::uint16_t* x, float* y) {
  const std::vector<std::size_t> runs = expert_runs(ws);
  const std::size_t experts = runs.size() - 1;
  Scratch::Frame frame(scratch_);
  const std::size_t plane = std::size_t(m) * std::size_t(k);
  const std::size_t per = std::clamp<std::size_t>(tile_bytes() / (2 * plane), 1, experts);
  auto* planes = scratch_.take<std::uint16_t>(per * plane);
  const std::size_t x_stride = kSlotRows * std::size_t(k), y_stride = kSlotRows * std::size_t(m);
  for (std::size_t e0 = 0; e0 < experts; e0 += per) {
    const std::size_t ne = std::min(per, experts - e0), j0 = runs[e0], j1 = runs[e0 + ne];
    std::vector<const void*> src(ne), tiles;
    for (std::size_t i = 0; i < ne; ++i) {
      src[i] = ws[runs[e0 + i]];
      for (std::size_t j = runs[e0 + i]; j < runs[e0 + i + 1]; ++j) tiles.push_back(planes + i * plane);
    }
    cuda::dequant_f16_matrices(reinterpret_cast<const std::byte* const*>(upload(src.data(), ne)), int(ne), dtype,
                               row_bytes, m, k, planes, s());
    batched_gemm(tiles.data(), std::size_t(k) * 2, m, k, x + j0 * x_stride, x_stride, kSlotRows, y + j0 * y_stride,
                 y_stride, false, j1 - j0, CUDA_R_16F);
  }
}

void CudaBackend::batched_gemm(const void* const* ws, std::size_t row_bytes, int m, int k, const std::uint16_t* b,
                               std::size_t b_stride, std::size_t n, float* c, std::size_t c_stride, bool accumulate,
                               std::size_t count, cudaDataType_t type) {
  std::vector<const void*> bs(count);
  std::vector<void*> cs(count);
  for (std::size_t j = 0; j < count; ++j) {
    bs[j] = b + j * b_stride;
    cs[j] = c + j * c_stride;
  }
  const float one = 1.f, beta = accumulate ? 1.f : 0.f;
  const void* const* a = upload(ws, count);
  const void* const* bp = upload(bs.data(), count);
  void* const* cp = const_cast<void* const*>(upload(cs.data(), count));
  const GemmTimer timer(this, {m, int64_t(n), k, int64_t(count), int64_t(row_bytes),
                               (accumulate ? 1 : 0) + (type == CUDA_R_16F ? 2 : 0)});
  if (cuda::LtBatchedGemm* lt = lt_batched()) {
    if (lt->run(a, int(row_bytes / 2), bp, cp, m, int(n), k, int(count), accumulate, s(), type) ==
        CUBLAS_STATUS_SUCCESS)
      return;
    cudaGetLastError();  // a shape it has no plan for: the batched call below takes it
  }
  const cublasStatus_t st =
      cublasGemmBatchedEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, m, int(n), k, &one, a, type, int(row_bytes / 2), bp, type, k,
                          &beta, cp, CUDA_R_32F, m, int(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) fail(std::string("cublasGemmBatchedEx: ") + cublas_status_text(st));
}

cuda::LtBatchedGemm* CudaBackend::lt_batched() {
  if (!lt_tried_) {
    lt_tried_ = true;
    std::string why;
    if (cuda::lt_batched_gemm_enabled() && !(lt_ = cuda::LtBatchedGemm::create(why)))
      std::fprintf(stderr, "freetoken: cuBLASLt: %s; the batched cuBLAS calls serve instead\n", why.c_str());
  }
  return lt_.get();
}

void CudaBackend::add_shared_expert(const MoeWeights& w, const float* x, std::size_t T, float* out) {
  if (!w.has_shared) return;
  Scratch::Frame frame(scratch_);
  const std::size_t H = std::size_t(w.hidden);
  float* shared = scratch_.floats(T * H);
  swiglu(w.shared, x, T, shared);
  if (!w.shared_gated) return add(out, shared, T * H);
  float* gate = scratch_.floats(T);
  linear(x, T, w.shared_gate, nullptr, gate);
  cuda::add_sigmoid_scaled(shared, gate, int(T), int(H), out, s());
}

cuda::ExpertEpilogue CudaBackend::epilogue(const MoeWeights& w) {
  cuda::ExpertEpilogue a = cuda::glu_epilogue(w.glu);
  a.gate_bias = w.gate_bias;
  a.up_bias = w.up_bias;
  a.down_bias = w.down_bias;
  return a;
}

const cuda::ExpertTable* CudaBackend::expert_table(const MoeWeights& w) {
  if (auto it = tables_.find(&w); it != tables_.end()) return it->second.get();
  std::unique_ptr<cuda::ExpertTable> table;
  const SwiGluMatrices& first = w.experts.front();
  bool fits = w.router_spec.top_k <= 32;
  std::vector<const std::byte*> gate, up, down;
  for (const SwiGluMatrices& e : w.experts) {
    for (const Matrix* m : {&e.gate, &e.up, &e.down}) {
      // bf16 rows the vector loads can read, or a GGUF block dtype (read a byte at a time).
      fits = fits && m->device &&
             (m->dtype == DType::kBF16 ? cuda::gemv_fits(m->device, m->row_bytes, m->cols)
                                       : cuda::is_block_dtype(m->dtype) && m->cols % 32 == 0);
    }
    fits = fits && e.gate.row_bytes == first.gate.row_bytes && e.up.row_bytes == first.gate.row_bytes &&
           e.down.row_bytes == first.down.row_bytes && e.gate.dtype == first.gate.dtype &&
           e.up.dtype == first.gate.dtype && e.down.dtype == first.down.dtype;
    gate.push_back(e.gate.device);
    up.push_back(e.up.device);
    down.push_back(e.down.device);
  }
  if (fits) {
    table = std::make_unique<cuda::ExpertTable>();
    table->gate = place_pointers(gate);
    table->up = place_pointers(up);
    table->down = place_pointers(down);
    fits = table->gate && table->up && table->down;
    table->gate_up_row_bytes = first.gate.row_bytes;
    table->down_row_bytes = first.down.row_bytes;
    table->hidden = int(w.hidden);
    table->inter = int(first.inter());
    table->act = epilogue(w);
    table->gate_up_dtype = first.gate.dtype;
    table->down_dtype = first.down.dtype;
    table->gate_up_units = table->down_units = true;
    for (const SwiGluMatrices& e : w.experts) {
      table->gate_up_units = table->gate_up_units &&
                             cuda::units_fit(e.gate.dtype, e.gate.device, e.gate.row_bytes, int(e.gate.cols)) &&
                             cuda::units_fit(e.up.dtype, e.up.device, e.up.row_bytes, int(e.up.cols));
      table->down_units =
          table->down_units && cuda::units_fit(e.down.dtype, e.down.device, e.down.row_bytes, int(e.down.cols));
    }
  }
  if (!fits) table.reset();
  return (tables_[&w] = std::move(table)).get();
}

void CudaBackend::trace_later(const int32_t* chosen_dev, std::size_t T, std::size_t K) {
  auto pinned = pass_host_.take(T * K * sizeof(int32_t));
  if (!pinned) throw std::bad_alloc();
  if (!replaying())
    check(cudaMemcpyAsync(*pinned, chosen_dev, T * K * sizeof(int32_t), cudaMemcpyDeviceToHost, s()), "routing");
  pending_traces_.push_back({reinterpret_cast<const int32_t*>(*pinned), T, K});
}

void CudaBackend::biased_expert(const MoeWeights& w, std::size_t e, const float* x, std::size_t T, float* out) {
  const SwiGluMatrices& m = w.experts[e];
  Scratch::Frame frame(scratch_);
  const std::size_t I = std::size_t(m.inter()), n = T * I;
  float* g = scratch_.floats(n);
  float* u = scratch_.floats(n);
  const LinearOut gate_up[] = {{&m.gate, w.gate_bias ? w.gate_bias + e * I : nullptr, g},
                               {&m.up, w.up_bias ? w.up_bias + e * I : nullptr, u}};
  linears(x, T, gate_up);
  cuda::expert_glu(g, u, g, n, w.glu, s());
  linear(g, T, m.down, w.down_bias ? w.down_bias + e * std::size_t(w.hidden) : nullptr, out);
}

void CudaBackend::swiglu(const SwiGluMatrices& m, const float* x, std::size_t T, float* out) {
  Scratch::Frame frame(scratch_);
  const std::size_t n = T * std::size_t(m.inter());
  float* g = scratch_.floats(n);
  float* u = scratch_.floats(n);
  const LinearOut gate_up[] = {{&m.gate, nullptr, g}, {&m.up, nullptr, u}};
  linears(x, T, gate_up);
  cuda::silu_mul(g, u, g, n, s());
  linear(g, T, m.down, nullptr, out);
}

}  // namespace ft::engine
