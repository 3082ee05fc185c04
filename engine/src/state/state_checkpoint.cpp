#include "ft/engine/state_checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>

namespace ft::engine {
namespace {

using store::ChunkKind;
using store::StateChunk;

std::vector<std::uint64_t> dims(const std::vector<int64_t>& shape) { return {shape.begin(), shape.end()}; }

store::DType store_dtype(KvDType d) { return d == KvDType::kBf16 ? store::DType::kBf16 : store::DType::kF32; }

// [layers, K|V, kv_heads, page_tokens, head_dim]; layers of different shapes: the page's elements.
std::vector<std::uint64_t> page_shape(const KvLayout& l) {
  if (!l.uniform()) return {std::uint64_t(l.page_bytes() / l.elem_bytes())};
  return {std::uint64_t(l.layers), 2, std::uint64_t(l.kv_heads), std::uint64_t(l.page_tokens),
          std::uint64_t(l.head_dim)};
}

// What each chunk of a checkpoint of `state` after `tokens` tokens must look like, and where its
// bytes go when restored (in the state's memory): the pages (allocated here) and the linear states.
struct Plan {
  std::vector<store::ChunkDesc> chunks;  // layer, kind, dtype, shape, bytes (no checksum)
  std::vector<std::byte*> dest;
  std::vector<KvPageRef> pages;
};

Result<Plan> plan_restore(SequenceState& state, std::int64_t tokens, bool allocate_pages) {
  Plan plan;
  FT_RETURN_IF_ERROR(state.allocate_linear());
  if (const KvPool* pool = state.pool()) {
    const KvLayout& l = pool->layout();
    for (std::int64_t p = 0; p < l.pages_for(tokens); ++p) {
      plan.chunks.push_back({std::uint32_t(p), ChunkKind::kKvPage, store_dtype(l.dtype), page_shape(l), l.page_bytes(), 0});
      if (!allocate_pages) continue;
      FT_ASSIGN_OR_RETURN(KvPageRef page, const_cast<KvPool*>(pool)->allocate());
      plan.dest.push_back(page->data());
      plan.pages.push_back(std::move(page));
    }
  }
  for (LinearState& l : state.linear()) {
    plan.chunks.push_back({std::uint32_t(l.layer), ChunkKind::kConv, store::DType::kF32, dims(l.conv_shape),
                           l.conv.size(), 0});
    plan.dest.push_back(l.conv.data());
    plan.chunks.push_back({std::uint32_t(l.layer), ChunkKind::kRecurrent, store::DType::kF32,
                           dims(l.recurrent_shape), l.recurrent.size(), 0});
    plan.dest.push_back(l.recurrent.data());
  }
  return plan;
}

// A linear state's bytes for a checkpoint: read now (on the host, or with a synchronous copy) or
// arriving beside the next pass (Memory::snapshot_to_host; readers wait through ChunkBytes::data()).
store::ChunkBytes linear_chunk(Memory& memory, const MemoryBlock& block, std::size_t n) {
  if (!block.data()) return std::vector<std::byte>(n);  // a state that never ran: zeros
  if (memory.is_host()) {
    std::vector<std::byte> bytes(n);
    std::memcpy(bytes.data(), block.data(), n);
    return bytes;
  }
  // Not zero-filled: the copy writes every byte, on the copier's thread, so this thread never
  // touches (faults in) the new memory.
  const std::shared_ptr<std::byte[]> host = std::make_shared_for_overwrite<std::byte[]>(n);
  std::shared_ptr<std::byte> bytes(host, host.get());
  std::shared_ptr<const CopyFence> arriving = memory.snapshot_to_host(bytes.get(), block.data(), n);
  auto state = std::make_shared<const ArrivingBytes>(std::move(bytes), n, std::move(arriving));
  return store::ChunkBytes::shared(state->bytes(), state);
}

bool same_layout(const store::ChunkDesc& want, std::uint32_t layer, ChunkKind kind, store::DType dtype,
                 const std::vector<std::uint64_t>& shape, std::uint64_t bytes) {
  return want.layer == layer && want.kind == kind && want.dtype == dtype && want.shape == shape && want.bytes == bytes;
}

// The checkpoint of `state` after its first `tokens` positions (checked by the callers).
store::ModelState checkpoint_of(const SequenceState& state, const ModelFingerprint& fingerprint, std::int64_t tokens) {
  store::ModelState out;
  out.tokens = std::uint64_t(tokens);
  out.model = fingerprint;
  Memory& memory = state.memory();
  if (const KvPool* pool = state.pool()) {
    const KvLayout& l = pool->layout();
    for (std::int64_t p = 0; p < l.pages_for(tokens); ++p) {
      const KvPageRef& page = state.pages()[std::size_t(p)];
      if (memory.is_host()) {  // shared, not copied: later snapshots of the sequence reuse it
        out.chunks.push_back({std::uint32_t(p), ChunkKind::kKvPage, store_dtype(l.dtype), page_shape(l),
                              store::ChunkBytes::shared({page->data(), l.page_bytes()}, page)});
        continue;
      }
      // Off the host: the page's host copy, made once its tokens are all there (KvPageMirror).
      const std::int64_t in_page = std::min<std::int64_t>(l.page_tokens, tokens - p * l.page_tokens);
      std::shared_ptr<const KvPageMirror> mirror = page->mirror();
      if (!mirror || mirror->tokens() < in_page) {
        std::shared_ptr<std::byte> bytes = const_cast<KvPool*>(pool)->mirror_buffer();
        std::shared_ptr<const CopyFence> arriving;
        if (bytes) {  // staging memory: the copy runs beside the next pass, readers wait for it
          arriving = memory.to_host_async(bytes.get(), page->data(), l.page_bytes());
        } else {  // a plain host buffer
          auto plain = std::make_shared<std::vector<std::byte>>(l.page_bytes());
          bytes = std::shared_ptr<std::byte>(plain, plain->data());
          memory.to_host(bytes.get(), page->data(), l.page_bytes());
        }
        mirror =
            std::make_shared<const KvPageMirror>(std::move(bytes), l.page_bytes(), in_page, page, std::move(arriving));
        page->set_mirror(mirror);
        const_cast<KvPool*>(pool)->count_mirror();
      }
      out.chunks.push_back({std::uint32_t(p), ChunkKind::kKvPage, store_dtype(l.dtype), page_shape(l),
                            store::ChunkBytes::shared(mirror->bytes(), mirror)});
    }
  }
  for (const LinearState& l : state.linear()) {
    out.chunks.push_back({std::uint32_t(l.layer), ChunkKind::kConv, store::DType::kF32, dims(l.conv_shape),
                          linear_chunk(memory, l.conv, l.conv_floats() * sizeof(float))});
    out.chunks.push_back({std::uint32_t(l.layer), ChunkKind::kRecurrent, store::DType::kF32, dims(l.recurrent_shape),
                          linear_chunk(memory, l.recurrent, l.recurrent_floats() * sizeof(float))});
  }
  return out;
}

}  // namespace

ModelFingerprint store_fingerprint(const Model& model) {
  std::string text = model.fingerprint();
  if (const auto kv = model.kv_layout()) {
    text += "|kv=" + std::string(kv_dtype_name(kv->dtype)) + "/page" + std::to_string(kv->page_tokens) + "/layout" +
            std::to_string(KvLayout::kLayoutVersion);
  }
  text += "|linear=f32|format=" + std::to_string(store::kCheckpointFormatVersion);
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return {h.high64, h.low64};
}

store::ModelState to_model_state(const SequenceState& state, const ModelFingerprint& fingerprint) {
  return checkpoint_of(state, fingerprint, state.position());
}

Result<store::ModelState> to_model_state(const SequenceState& state, const ModelFingerprint& fingerprint,
                                         std::int64_t tokens) {
  if (tokens < 0 || tokens > state.position())
    return invalid_argument("a checkpoint at " + std::to_string(tokens) + " tokens of a state that holds " +
                            std::to_string(state.position()));
  if (tokens < state.position() && !state.holds_earlier_positions())
    return invalid_argument("a linear-attention state holds only its latest position, " +
                            std::to_string(state.position()) + ", not " + std::to_string(tokens));
  return checkpoint_of(state, fingerprint, tokens);
}

Status restore_from_model_state(const store::ModelState& checkpoint, SequenceState& state) {
  state.reset();
  const auto fail = [&](Status s) {
    state.reset();
    return s;
  };
  const std::int64_t n = std::int64_t(checkpoint.tokens);
  auto plan = plan_restore(state, n, /*allocate_pages=*/false);
  if (!plan.is_ok()) return fail(plan.status());
  if (plan->chunks.size() != checkpoint.chunks.size()) return fail(not_found("checkpoint has another state layout"));
  std::vector<KvPageRef> pages;
  std::size_t linear_chunk = 0;
  for (std::size_t i = 0; i < checkpoint.chunks.size(); ++i) {
    const StateChunk& c = checkpoint.chunks[i];
    const store::ChunkDesc& want = plan->chunks[i];
    if (!same_layout(want, c.layer, c.kind, c.dtype, c.shape, c.data.size()))
      return fail(not_found("checkpoint has another state layout"));
    if (c.kind != ChunkKind::kKvPage) {
      state.memory().from_host(plan->dest[linear_chunk++], c.data.data(), c.data.size());
      continue;
    }
    // A page of this pool, or the host copy of one that still lives: share the page itself, no
    // copy back (its checkpointed positions cannot have changed since; the sequence copies it
    // before writing into it).
    if (KvPageRef page = state.pool()->page_of(c.data)) {
      pages.push_back(std::move(page));
      continue;
    }
    auto page = const_cast<KvPool*>(state.pool())->allocate();
    if (!page.is_ok()) return fail(page.status());
    state.memory().from_host((*page)->data(), c.data.data(), c.data.size());
    pages.push_back(std::move(page).value());
  }
  state.set_kv(std::move(pages), n);
  return Status::ok();
}

Status restore_model_state(store::StateTier& tier, const store::StoreKey& key, SequenceState& state) {
  state.reset();
  const auto fail = [&](Status s) {
    state.reset();
    return s;
  };
  if (auto shared = tier.load_shared(key)) {
    if (shared->model != key.model) return fail(not_found("checkpoint " + key.prefix.to_hex() + " has another state layout"));
    Status s = restore_from_model_state(*shared, state);
    if (!s && s.code() == ErrorCode::kNotFound) return fail(not_found("checkpoint " + key.prefix.to_hex() + ": " + s.message()));
    return s;
  }
  FT_ASSIGN_OR_RETURN(store::ModelStateHeader header, tier.lookup_header(key));
  const auto layout_mismatch = [&] { return fail(not_found("checkpoint " + key.prefix.to_hex() + " has another state layout")); };
  if (header.model != key.model) return layout_mismatch();
  const std::int64_t n = std::int64_t(header.tokens);
  auto plan = plan_restore(state, n, /*allocate_pages=*/true);
  if (!plan.is_ok()) return fail(plan.status());
  if (plan->chunks.size() != header.chunks.size()) return layout_mismatch();
  for (std::size_t i = 0; i < header.chunks.size(); ++i) {
    const store::ChunkDesc& want = plan->chunks[i];
    const store::ChunkDesc& have = header.chunks[i];
    if (!same_layout(want, have.layer, have.kind, have.dtype, have.shape, have.bytes)) return layout_mismatch();
  }
  Status read = tier.read_chunks(key, header, [&](const store::ChunkPiece& p) -> Status {
    if (p.offset + p.bytes.size() > header.chunks[p.chunk_index].bytes) return corrupt("checkpoint piece beyond its chunk");
    state.memory().from_host(plan->dest[p.chunk_index] + p.offset, p.bytes.data(), p.bytes.size());
    return Status::ok();
  });
  if (!read) return fail(not_found("checkpoint " + key.prefix.to_hex() + ": " + read.message()));
  state.set_kv(std::move(plan->pages), n);
  return Status::ok();
}

}  // namespace ft::engine
