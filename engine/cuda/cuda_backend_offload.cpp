// Mixture of experts with the routed experts in host RAM: the expert cache's slots, misses fetched,
// read in place or computed on the CPU (expert_slots.h), prefill streaming.
#include "cuda_backend.h"

namespace ft::engine {

void CudaBackend::moe_offloaded(const MoeWeights& w, const float* x, const float* router_x, std::size_t T, float* out) {
  if (!offload_ready(w)) return;
  std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeRoute, true);
  const std::size_t K = w.router_spec.top_k;
  const cuda::RouteSpec route = route_tokens(w, router_x, T, T <= kFusedMoeTokens);
  if (trace_) trace_later(route.chosen, T, K);
  // Decode: the next layer's router on this layer's input names most of the experts it will choose
  // (ExpertSlots::prefetch), in the same trip to the host as this layer's choices.
  const int32_t* predicted = nullptr;
  const int layer = offload_->layer_of(w);
  const MoeWeights* next = offload_->next_layer(layer);
  if (T <= kFusedMoeTokens && next && offload_->prefetch_on(int(T * K)) && next->router_spec.top_k == K &&
      next->experts.size() == w.experts.size()) {
    // In place, a side stream reads them after this op has returned: not in its scratch.
    int32_t* into = offload_->in_place() ? offload_->ahead_choices(layer + 1) : nullptr;
    predicted = route_tokens(*next, router_x ? router_x : x, T, false, into).chosen;
  }
  phase.reset();
  offloaded_experts(w, x, T, route.chosen, route.weights, route.by_expert, out, predicted);
}

bool CudaBackend::offload_ready(const MoeWeights& w) {
  cuda::ExpertSlots& o = *offload_;
  o.layer_of(w);
  if (std::string why = o.check(w); !why.empty()) {
    fail(why);
    return false;
  }
  if (!o.calibrated()) o.calibrate(w);
  return true;
}

void CudaBackend::offloaded_experts(const MoeWeights& w, const float* x, std::size_t T, const int32_t* chosen_dev,
                                    const float* weights_dev, const cuda::ChoicesByExpert& by_expert, float* out,
                                    const int32_t* predicted_dev) {
  cuda::ExpertSlots& o = *offload_;
  const std::size_t K = w.router_spec.top_k, H = std::size_t(w.hidden);
  const int layer = o.layer_of(w);
  const bool decode = T <= kFusedMoeTokens;
  const SwiGluMatrices& first = w.experts.front();
  cuda::ExpertTable dims;
  dims.gate_up_row_bytes = first.gate.row_bytes;
  dims.down_row_bytes = first.down.row_bytes;
  dims.hidden = int(H);
  dims.inter = int(first.inter());
  dims.act = epilogue(w);
  // Choices the CPU computes read the zero expert on the GPU: no biases for them there.
  dims.act.zero_gate = o.zero(w).gate;
  dims.act.zero_down = o.zero(w).down;
  dims.gate_up_dtype = first.gate.dtype;
  dims.down_dtype = first.down.dtype;
  // slots start on 256 bytes: the rows fit wherever the first expert's do
  dims.gate_up_units = cuda::units_fit(first.gate.dtype, nullptr, first.gate.row_bytes, int(H));
  dims.down_units = cuda::units_fit(first.down.dtype, nullptr, first.down.row_bytes, int(first.inter()));
  std::optional<Timed> phase(std::in_place, this, OpProfile::kMoeExperts, true);
  if (decode && o.in_place()) {
    decode_in_place(w, layer, dims, x, T, K, chosen_dev, by_expert, out, predicted_dev);
  } else if (decode) {
    o.order_after_in_place_copies(s());
    decode_offloaded(w, layer, dims, x, T, K, chosen_dev, by_expert, out, predicted_dev);
  } else {
    o.order_after_in_place_copies(s());
    prefill_offloaded(w, layer, dims, x, T, K, chosen_dev, weights_dev, out);
  }
  phase.emplace(this, OpProfile::kMoeCombine, true);
  add_shared_expert(w, x, T, out);
}

void CudaBackend::decode_in_place(const MoeWeights& w, int layer, cuda::ExpertTable table, const float* x,
                                  std::size_t T, std::size_t K, const int32_t* chosen_dev,
                                  const cuda::ChoicesByExpert& by_expert, float* out, const int32_t* predicted_dev) {
  cuda::ExpertSlots& o = *offload_;
  if (!o.knows_in_place(layer)) {
    // A layer's first in-place step (never a recorded one: a shape runs once before it records):
    // the table the pass began with has no host addresses for it yet.
    if (std::string why = o.know_in_place(w, layer); !why.empty()) return fail(why);
    o.prepare_in_place(s());
  }
  if (T * K > std::size_t(cuda::ExpertSlots::kMaxInPlaceChoices)) return fail("internal error: too many choices");
  const std::size_t E = w.experts.size(), H = std::size_t(table.hidden);
  table.gate = o.in_place_table(layer);
  // The CPU's share starts from the input and choices in host memory while the GPU computes
  // its own; the GPU waits for its output only to add it. Published first, so that the CPU starts
  // while the GPU stages or reads its misses.
  const bool share = o.cpu_share();
  const cuda::ExpertSlots::InPlaceIo& io = o.in_place_io(layer);
  const std::uint8_t* from_host = o.in_place_from_host(layer);  // the misses the GPU reads
  // The experts the layer before copied ahead for this one are no misses here.
  o.take_staged_ahead(layer, pass_, s(), table.gate, from_host);
  if (share && o.split_by_layer()) {
    // This layer's misses split by the share on the device; the kernels read the split table.
    const cuda::ExpertPtrs z = o.zero(w);
    const std::byte* const zero[3] = {z.gate, z.up, z.down};
    const std::byte** split = scratch_.take<const std::byte*>(3 * E);
    std::uint8_t* gpu_from_host = scratch_.take<std::uint8_t>(E);
    cuda::split_misses_to_host(x, T * H, by_expert.expert, by_expert.weight, int(T * K), table.gate, from_host, int(E),
                               zero, o.share_device(), layer, split, gpu_from_host, io.x, io.chosen, io.weights, io.in,
                               o.step_device(), s());
    table.gate = split;
    from_host = gpu_from_host;
  } else if (share) {
    cuda::publish_to_host(x, T * H, by_expert.expert, by_expert.weight, int(T * K), io.x, io.chosen, io.weights, io.in,
                          o.step_device(), s());
  }
  if (share) o.queue_cpu_share(layer, int(T), int(K));
  // The next layer's predicted misses, copied ahead on a side stream while this layer computes.
  if (predicted_dev)
    if (const MoeWeights* next = o.next_layer(layer); next && o.knows_in_place(layer + 1))
      o.stage_ahead_in_place(*next, layer + 1, predicted_dev, int(T * K), pass_, s());
  if (o.stage_misses()) {
    // The misses among the first choices cross PCIe by wide loads into staging slots (256-byte
    // aligned, as cache slots are) and the expert kernels read them there (not the CPU's: the
    // kernels know the zero expert by its address, and skip its biases).
    const int n = int(std::min<std::size_t>(T * K, cuda::ExpertSlots::kMaxStagedChoices));
    const cuda::StagedExpert shape = o.staged_shape(w);
    std::byte* staging = cuda::ExpertSlots::slot_start(
        scratch_.take<std::byte>(std::size_t(n) * shape.slot_bytes + cuda::ExpertSlots::kSlotAlign));
    const std::byte** staged = scratch_.take<const std::byte*>(3 * E);
    cuda::stage_missed_experts(table.gate, from_host, int(E), chosen_dev, n, shape, staging, staged, s());
    table.gate = staged;
  }
  table.up = table.gate + E;
  table.down = table.gate + 2 * E;
  check(cudaMemcpyAsync(o.in_place_choices(layer), chosen_dev, T * K * sizeof(int32_t), cudaMemcpyDeviceToHost, s()),
        "routing");
  o.note_in_place(layer, int(T * K));
  float* h = scratch_.floats(T * K * std::size_t(table.inter));
  experts_decode(table, x, T, K, chosen_dev, h, by_expert, out);
  if (share) {
    cuda::wait_host_flag_at(io.out, o.step_device(), s());
    cuda::add(out, io.y, T * std::size_t(table.hidden), s());
  }
}

void CudaBackend::decode_offloaded(const MoeWeights& w, int layer, cuda::ExpertTable table, const float* x,
                                   std::size_t T, std::size_t K, const int32_t* chosen_dev,
                                   const cuda::ChoicesByExpert& by_expert, float* out, const int32_t* predicted_dev) {
  cuda::ExpertSlots& o = *offload_;
  const std::size_t E = w.experts.size(), H = std::size_t(table.hidden), I = std::size_t(table.inter);
  const int choices = int(T * K);
  // The choices (in expert order per token, as the down kernel adds them), the next layer's
  // predicted ones and the input, to the host.
  auto pinned = pass_host_.take(T * K * 12 + T * H * 4);
  if (!pinned) throw std::bad_alloc();
  auto* chosen = reinterpret_cast<int32_t*>(*pinned);
  auto* weights = reinterpret_cast<float*>(*pinned + T * K * 4);
  auto* predicted = reinterpret_cast<int32_t*>(*pinned + T * K * 8);
  auto* x_host = reinterpret_cast<float*>(*pinned + T * K * 12);
  check(cudaMemcpyAsync(chosen, by_expert.expert, T * K * 4, cudaMemcpyDeviceToHost, s()), "routing");
  check(cudaMemcpyAsync(weights, by_expert.weight, T * K * 4, cudaMemcpyDeviceToHost, s()), "routing");
  if (predicted_dev)
    check(cudaMemcpyAsync(predicted, predicted_dev, T * K * 4, cudaMemcpyDeviceToHost, s()), "routing");
  check(cudaMemcpyAsync(x_host, x, T * H * 4, cudaMemcpyDeviceToHost, s()), "routing");
  wait_mid_pass("routing");
  if (!failure_.empty()) return;
  o.settle();
  // Hits, and the misses with their token counts.
  ExpertCache& cache = o.cache();
  cache.begin_step();
  std::vector<int> tokens(E, 0);
  for (std::size_t i = 0; i < T * K; ++i) ++tokens[std::size_t(chosen[i])];
  std::vector<cuda::ExpertPtrs> where(E, o.zero(w));
  std::vector<SplitMiss> misses;
  for (std::size_t e = 0; e < E; ++e) {
    if (!tokens[e]) continue;
    if (std::optional<int> slot = cache.lookup(layer, int(e))) {
      where[e] = o.slot(*slot, w);
    } else if (const int ahead = o.prefetched(layer, int(e), pass_); ahead >= 0) {
      where[e] = o.slot(ahead, w);  // copied ahead while the layer before computed
      o.used_prefetch(layer, int(e));
    } else {
      misses.push_back({int(e), tokens[e]});
    }
  }
  // Misses the cache admits (used more often than a slot's expert) are fetched into it under
  // every policy but cpu: they pay off as later hits. The rest split between transient slots
  // (fetched for this layer only) and the CPU.
  const std::size_t bytes = cuda::ExpertSlots::expert_bytes(w);
  const MoePolicy& policy = o.options().policy;
  std::vector<SplitMiss> rest;
  int committed = 0;
  for (const SplitMiss& m : misses) {
    if (policy.kind != MoePolicy::Kind::kCpu) {
      if (std::optional<ExpertCache::Admitted> a = cache.admit(layer, m.expert, ExpertCache::Admission::kIfHotter)) {
        o.fetch(w, m.expert, a->slot);
        where[std::size_t(m.expert)] = o.slot(a->slot, w);
        ++committed;
        continue;
      }
    }
    rest.push_back(m);
  }
  const SplitPlan plan =
      plan_split(policy, o.model().costs(), rest, bytes, o.decode_transient_room(layer, choices, pass_), committed);
  std::vector<bool> on_cpu(E, false);
  for (int e : plan.cpu) on_cpu[std::size_t(e)] = true;
  for (std::size_t i = 0; i < plan.fetch.size(); ++i) {
    const int e = plan.fetch[i], slot = o.decode_transient_slot(layer, int(i), choices, pass_);
    o.fetch(w, e, slot);
    where[std::size_t(e)] = o.slot(slot, w);
  }
  const bool fetched = committed > 0 || !plan.fetch.empty();
  const bool any_cpu = std::find(on_cpu.begin(), on_cpu.end(), true) != on_cpu.end();
  o.fetched_into(s(), any_cpu);
  o.wait_prefetched(layer, s());
  // The next layer's predicted experts cross after this layer's own fetches, while it computes;
  // queued once this layer's work is (their calls take the host a few microseconds an expert).
  const auto prefetch_next = [&] {
    if (!predicted_dev || !failure_.empty()) return;
    if (const MoeWeights* next = o.next_layer(layer)) o.prefetch(*next, layer + 1, {predicted, T * K}, pass_, choices);
  };
  // The GPU's share: the kernels read each choice's expert from the step's table.
  std::vector<const std::byte*> gate(E), up(E), down(E);
  for (std::size_t e = 0; e < E; ++e) {
    gate[e] = where[e].gate;
    up[e] = where[e].up;
    down[e] = where[e].down;
  }
  table.gate = upload(gate.data(), E);
  table.up = upload(up.data(), E);
  table.down = upload(down.data(), E);
  float* h = scratch_.floats(T * K * I);
  // The kernels take the choices per token in the router's order (gate/up) and by expert (down).
  experts_decode(table, x, T, K, chosen_dev, h, by_expert, out);
  if (!any_cpu) return prefetch_next();
  // The CPU's share, on the CPU experts' threads while the GPU runs its own; the GPU waits for
  // its flag and adds the output straight from pinned host memory, so this thread goes on
  // issuing the next layer's work meanwhile.
  auto mine_host = pass_host_.take(T * K * 4);
  auto y_host = pass_host_.take(T * H * 4);
  if (!mine_host || !y_host) throw std::bad_alloc();
  auto* mine = reinterpret_cast<int32_t*>(*mine_host);
  std::size_t cpu_experts = 0;
  for (std::size_t i = 0; i < T * K; ++i) mine[i] = on_cpu[std::size_t(chosen[i])] ? chosen[i] : -1;
  for (bool c : on_cpu) cpu_experts += c ? 1 : 0;
  float* y = reinterpret_cast<float*>(*y_host);
  const unsigned seq = o.next_cpu_seq();
  const MoeWeights& on_cpu_w = o.for_cpu(layer);  // here: layer_of may grow the layer list meanwhile
  o.cpu().submit([&o, &on_cpu_w, layer, x_host, T, K, mine, weights, y, seq, cpu_experts, bytes, fetched] {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      o.cpu().run(on_cpu_w, x_host, T, K, mine, weights, y);
    } catch (const std::exception& e) {
      o.cpu_failed(std::string("the CPU experts failed: ") + e.what());  // the pass reports it at its end
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.model().observe_cpu(cpu_experts * bytes, secs, fetched);
    ExpertOffloadStats& st = o.stats();
    st.cpu_computed += cpu_experts;
    st.layer_cpu_computed[std::size_t(layer)] += cpu_experts;
    st.cpu_bytes += cpu_experts * bytes;
    st.cpu_seconds += secs;
    o.signal(seq);  // last: the GPU (and through it the next layer) goes on after this
  });
  cuda::wait_host_flag(o.cpu_flag(), seq, s());
  cuda::add(out, y, T * H, s());
  prefetch_next();
}

void CudaBackend::prefill_offloaded(const MoeWeights& w, int layer, const cuda::ExpertTable& dims, const float* x,
                                    std::size_t T, std::size_t K, const int32_t* chosen_dev, const float* weights_dev,
                                    float* out) {
  cuda::ExpertSlots& o = *offload_;
  const std::size_t E = w.experts.size();
  const std::span<const int32_t> counts = expert_counts(chosen_dev, T * K, E);
  if (!failure_.empty()) return;
  o.settle();
  std::vector<int32_t>& active = o.last_active(layer);
  active.clear();
  for (std::size_t e = 0; e < E; ++e)
    if (counts[e] > 0) active.push_back(int32_t(e));
  // Rounds of at most half the cache slots other layers' floors leave: a round's copies run
  // while the round before computes (ExpertSlots::begin_round).
  ExpertCache& cache = o.cache();
  const int spare = cache.slots() - cache.floor_per_layer() * (cache.layers() - 1);
  const std::size_t round = std::size_t(std::max(1, spare / 2));
  const Resolve resolve = [&](std::span<const int32_t> experts) {
    o.begin_round();
    std::vector<std::optional<int>> slots(experts.size());
    for (std::size_t i = 0; i < experts.size(); ++i) slots[i] = cache.lookup(layer, experts[i]);  // hits first
    std::vector<cuda::ExpertPtrs> where;
    std::vector<std::pair<int, int>> copies;  // (expert, slot), issued together (fetch_many)
    for (std::size_t i = 0; i < experts.size(); ++i) {
      if (!slots[i]) {
        // Streamed: what the cache held before this pass stays (ExpertCache::kStream).
        std::optional<ExpertCache::Admitted> a = cache.admit(layer, experts[i], ExpertCache::Admission::kStream);
        if (!a) {  // the round before (or a prefetch that guessed wrong) holds the rest: wait for it
          o.fetch_many(w, copies);  // the copies so far go before the wait
          copies.clear();
          o.copy_after_all(s());
          a = cache.admit(layer, experts[i], ExpertCache::Admission::kStream);
        }
        if (!a) {
          fail("internal error: no expert slot for a prefill round");
          return std::vector<cuda::ExpertPtrs>{};
        }
        copies.emplace_back(experts[i], a->slot);
        slots[i] = a->slot;
      }
      where.push_back(o.slot(*slots[i], w));
    }
    o.fetch_many(w, copies);
    o.fetched_into(s(), false);
    return where;
  };
  experts_batched(dims, w, x, T, K, counts, chosen_dev, weights_dev, out, round, resolve, [&] { o.end_round(s()); });
  // A chunk this size touches most experts of every layer: the next layer's (those its last
  // chunk used, or all) cross PCIe while this one computes, as a round of its own (as many as
  // the slots the last two rounds leave), so the copies run on.
  const MoeWeights* next = o.next_layer(layer);
  if (!next || T * K < 2 * E) return;
  const int next_id = layer + 1;
  std::vector<int32_t> wanted = o.last_active(next_id);
  if (wanted.empty())
    for (int e = 0; e < int(next->experts.size()); ++e) wanted.push_back(e);
  // At most a round's worth, so the next layer's first round finds slots for what was not
  // guessed.
  o.begin_round();
  std::vector<std::pair<int, int>> copies;  // (expert, slot)
  for (const int32_t e : wanted) {
    if (copies.size() >= round) break;
    if (cache.find(next_id, e)) continue;
    std::optional<ExpertCache::Admitted> a = cache.admit(next_id, e, ExpertCache::Admission::kStream, false);
    if (!a) break;
    copies.emplace_back(e, a->slot);
  }
  o.fetch_many(*next, copies);
  o.end_round(s());
}

}  // namespace ft::engine
