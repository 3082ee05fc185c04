// The CUDA backend's kernels, as host functions that enqueue work on a stream (never synchronise).
// Each is the device twin of a CPU reference op (ops_*.h); tests/gpu compares them through the
// Backend seam. Every pointer is device memory unless its comment says host. Activations are fp32,
// weights in their stored dtype (bf16/f16/f32), KV pages bf16 in the layout of kv_pool.h.
// Internal to engine/cuda (needs the CUDA headers); compiled only in CUDA builds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ft/engine/checkpoint.h"
#include "ft/engine/kv_pool.h"
#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_deltanet.h"
#include "ft/engine/ops_dsa.h"
#include "ft/engine/ops_moe.h"

namespace ft::engine::cuda {

// ---- Dense and elementwise (dense_kernels.cu) ----------------------------------------------------

// out[t, :] = fp32(table[ids[t], :]); table [rows, cols] of `dtype` with row stride row_bytes.
void embedding(const std::byte* table, DType dtype, std::size_t row_bytes, int64_t cols, const int32_t* ids,
               int T, float* out, cudaStream_t s);
// x fp32 [n] as two 16-bit halves, x ~= hi + lo (each round to nearest even; `f16` picks the
// type), in groups of `group` elements: group j's hi into out[2j group ..], its lo right after.
// A product of both halves with the same weights, added, is as exact as fp32 activations (the CPU
// backends' "bf16x2"). group = n: one hi block, then one lo block.
void split_16(const float* x, std::size_t n, std::size_t group, bool f16, std::uint16_t* out, cudaStream_t s);
// The slot layout the batched expert GEMMs read and write (experts_batched in cuda_backend_moe.cpp):
// rows are grouped in slots of slot_rows rows, and each slot is split as split_16 does with group
// slot_rows * width: the slot's high halves (or, for a GEMM's fp32 output, the products of them),
// then its low ones. Row r of slot r / slot_rows sits at 2 slot_rows (r / slot_rows) + r % slot_rows.
// x fp32 [n] rounded to fp16 (nearest even; held at +-65504 where it would overflow): the input of
// the one-plane fp16 block products.
void round_f16(const float* x, std::size_t n, std::uint16_t* out, cudaStream_t s);
// gather_rows and split_16 in one pass: row r of the split output is src[rows[r], :] (zeros where
// rows[r] < 0), bf16 halves, in the slot layout. Bit for bit the two passes' output.
void gather_split(const float* src, const int64_t* rows, int R, int width, int slot_rows, std::uint16_t* out,
                  cudaStream_t s);
// The same gather into one fp16 row each (round_f16's rounding), rows [R, width]: the input of a
// product on one fp16 plane.
void gather_f16(const float* src, const int64_t* rows, int R, int width, std::uint16_t* out, cudaStream_t s);
// What an expert does after its products (ref::ExpertGlu and the family's biases): the GLU of its
// gate and up products (SwiGLU; GeGLU where `gelu`; the clamped GLU of gpt-oss and DeepSeek-V4
// where `clamped`) and, where the family has them, biases by expert id: gate_bias and up_bias
// [E, inter] added before the GLU, down_bias [E, hidden] after the down product (device; null:
// none).
struct ExpertEpilogue {
  bool gelu = false;
  bool clamped = false;
  float alpha = 1.702f;
  float limit = 7.f;
  float up_offset = 1.f;
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
  // An offloaded layer's all-zero expert (its gate and down matrices): a choice the CPU computes
  // reads it on the GPU and must add nothing there, so it takes no bias either.
  const std::byte* zero_gate = nullptr;
  const std::byte* zero_down = nullptr;
  bool biased() const { return gate_bias || up_bias || down_bias; }
};
// The epilogue of `glu` without biases.
inline ExpertEpilogue glu_epilogue(const ref::ExpertGlu& glu) {
  ExpertEpilogue a;
  a.gelu = glu.gelu_tanh;
  a.clamped = glu.clamped;
  a.alpha = glu.alpha;
  a.limit = glu.limit;
  a.up_offset = glu.up_offset;
  return a;
}
// The experts' GLU and split_16 in one pass: row r of the split output is the epilogue's GLU of
// row r's gate and up plus, where it has them, the gate and up biases of the row's expert,
// experts[j] for slot j (read only with biases). gate and up are fp32 in the same slot layout (what
// a GEMM over a slot's both halves writes: a row's value is the sum of its high and low parts)
// where in_parts is 2, rows [R, width] (block_mma_products') where 1.
void glu_split(const float* gate, const float* up, int R, int width, const ExpertEpilogue& act, const int32_t* experts,
               int slot_rows, int in_parts, std::uint16_t* out, cudaStream_t s);
// glu_split's values as one fp16 row each (round_f16's rounding), rows [R, width].
void glu_f16(const float* gate, const float* up, int R, int width, const ExpertEpilogue& act, const int32_t* experts,
             int slot_rows, int in_parts, std::uint16_t* out, cudaStream_t s);
// y += bias[experts[j], :] for every row of slot j (padding rows too, which nothing reads): the down
// biases of the batched experts. y fp32 in the slot layout (into each row's high part) where parts
// is 2, rows [R, width] where 1.
void add_expert_bias(float* y, int R, int width, const float* bias, const int32_t* experts, int slot_rows, int parts,
                     cudaStream_t s);
// y [T, n] = y2 [T, n] + y2 [T + t, n] (+ bias[c]): the two halves of a product over 2T columns.
void add_halves(const float* y2, int T, int n, const float* bias, float* y, cudaStream_t s);
// ref::rms_norm over `rows` rows of `dim`.
void rms_norm(const float* x, const float* w, float* out, int rows, int dim, float eps, bool zero_centered,
              cudaStream_t s);
// x += delta, then out = rms_norm(x) (out may alias x), in one pass where the rows allow.
void add_rms_norm(float* x, const float* delta, const float* w, float* out, int rows, int dim, float eps,
                  bool zero_centered, cudaStream_t s);
void silu_mul(const float* gate, const float* up, float* out, std::size_t n, cudaStream_t s);
// ref::gelu_tanh_mul, ref::scale, ref::softcap.
void gelu_tanh_mul(const float* gate, const float* up, float* out, std::size_t n, cudaStream_t s);
void scale(float* x, std::size_t n, float factor, cudaStream_t s);
void softcap(float* x, std::size_t n, float cap, cudaStream_t s);
// out[i] = ref::expert_glu(glu, gate[i], up[i]) (gpt-oss's clamped GLU, Gemma 4's GeGLU); out may
// alias gate or up.
void expert_glu(const float* gate, const float* up, float* out, std::size_t n, const ref::ExpertGlu& glu,
                cudaStream_t s);
// Holds the stream until *flag (host memory, written by a CPU thread) reaches `value`: the GPU
// waits for a CPU result while the host thread goes on issuing work. One thread spinning with
// sleeps; launched without programmatic overlap.
void wait_host_flag(const unsigned* flag, unsigned value, cudaStream_t s);
// As wait_host_flag, for the value *value on the device when the kernel runs (a recorded step
// replays with the step number uploaded before it).
void wait_host_flag_at(const unsigned* flag, const unsigned* value, cudaStream_t s);
// A MoE layer's input x [nx] and its choices (n experts, n weights) to host memory the GPU maps
// (hx, hc, hw), then `flag` raised to *value: what the CPU's share of the layer starts from.
void publish_to_host(const float* x, std::size_t nx, const int32_t* chosen, const float* weights, int n, float* hx,
                     int32_t* hc, float* hw, unsigned* flag, const unsigned* value, cudaStream_t s);
// The CPU's share of one MoE layer's misses, decided on the device each step (direct:Q): of the M
// distinct experts the choices name that `table` (the layer's gate[E], up[E], down[E]) reads from
// host memory (from_host[e]), the first floor(*share M + u) in choice order go to the CPU (u in
// [0, 1) fixed by the step *value and `layer`) and the GPU reads the rest in place, so every layer
// splits its own misses by the share. Writes `split` (3 E pointers: the table with the CPU's
// experts as the zero expert, what the expert kernels read) and gpu_from_host (E flags: the
// misses the GPU reads), then publishes as publish_to_host does with the GPU's choices as -1 in hc.
void split_misses_to_host(const float* x, std::size_t nx, const int32_t* chosen, const float* weights, int n,
                          const std::byte* const* table, const std::uint8_t* from_host, int E,
                          const std::byte* const (&zero)[3], const float* share, int layer, const std::byte** split,
                          std::uint8_t* gpu_from_host, float* hx, int32_t* hc, float* hw, unsigned* flag,
                          const unsigned* value, cudaStream_t s);
inline constexpr int kSplitMaxExperts = 8192;
// dst [bytes] (device) = pinned [bytes] (page-locked host memory, which the GPU reads through unified
// addressing): a copy by the SMs, so it never queues behind the copy engine's transfers.
void copy_from_host(void* dst, const void* pinned, std::size_t bytes, cudaStream_t s);
void mul_sigmoid(float* x, const float* gate, std::size_t n, cudaStream_t s);
// ref::scale_by_top_sigmoid and ref::attention_temperature (positions device memory).
void scale_by_top_sigmoid(const float* x, const float* logits, int T, int width, int E, float* out, cudaStream_t s);
void attention_temperature(float* x, int T, int width, const int64_t* positions, float floor_scale, float attn_scale,
                           cudaStream_t s);
void add(float* y, const float* x, std::size_t n, cudaStream_t s);
// y[t, :] += bias for T rows of n.
void add_bias(float* y, const float* bias, int T, int n, cudaStream_t s);
// dst[i, :] = src[rows[i], :], zeros where rows[i] < 0 (padding); rows is device memory.
void gather_rows(const float* src, const int64_t* rows, int n, int width, float* dst, cudaStream_t s);
// ref::copy_columns: dst[r, 0:width] = src[r / repeat, 0:width], rows dst_ld / src_ld floats apart.
void copy_columns(const float* src, std::size_t src_ld, std::size_t repeat, float* dst, std::size_t dst_ld,
                  std::size_t rows, std::size_t width, cudaStream_t s);

// ---- Small-batch products (gemv_kernels.cu) -------------------------------------------------------
// The decode path: a few rows of fp32 activations against bf16 weights, one warp per output row
// reading it once for every row of x (memory-bound, fp32 products and accumulation, no split).

// Activations of the integer decode products (block_units.h's codes_dot): x [T, cols] as two int8
// planes, x ~= d1 hi + d2 lo per 32-value block, and per block {d1, d2, sum of values 0..15, sum of
// 16..31}. cols a multiple of 256; hi, lo and meta 16-byte aligned.
struct X8 {
  const std::int8_t* hi = nullptr;  // [T, cols]
  const std::int8_t* lo = nullptr;  // [T, cols]
  const float* meta = nullptr;      // [T, cols / 32, 4]
};
// Bytes quantize_x8 writes for [T, cols] (hi, lo, meta back to back, each 16-byte aligned).
std::size_t x8_bytes(int T, int cols);
// x [T, cols] into `buf` (x8_bytes of it, 16-byte aligned); the planes' view of it.
X8 quantize_x8(const float* x, int T, int cols, std::byte* buf, cudaStream_t s);
// Where a kernel writes int8 planes: X8's layout, writable.
struct X8Out {
  std::int8_t* hi = nullptr;
  std::int8_t* lo = nullptr;
  float4* meta = nullptr;
};
// The planes of [T, cols] in `buf` (x8_bytes(T, cols) of it, 16-byte aligned), and a view of them
// from row `row0` on.
X8Out x8_planes(std::byte* buf, int T, int cols);
X8 x8_rows(const X8Out& planes, int row0, int cols);
// x [T, cols] quantised into the first T rows of `out` (planes made for as many rows or more).
void quantize_x8_into(const float* x, int T, int cols, const X8Out& out, cudaStream_t s);
// Row r of the planes [R, cols] is src[rows[r], :] quantised (zeros where rows[r] < 0): the MoE's
// gather into its slots and quantize_x8 in one pass.
void quantize_x8_gather(const float* src, const int64_t* rows, int R, int cols, const X8Out& out, cudaStream_t s);
// glu_split's values quantised into int8 planes instead of split (the input of a down product on
// block_mma_products): gate and up fp32 in the slot layout when parts is 2, or [R, width] rows
// when 1 (block_mma_products' output).
void glu_x8(const float* gate, const float* up, int R, int width, const ExpertEpilogue& act, const int32_t* experts,
            int slot_rows, int parts, const X8Out& out, cudaStream_t s);

// ---- Prefill products on the blocks, int8 tensor cores (block_mma.cu) ------------------------------
// Whether block_mma_products takes a [rows, cols] weight in `dtype`: the types with integer codes
// (Q4_K, Q5_K, Q6_K, Q4_0, Q8_0), rows a multiple of 64, cols of 256, and FT_CUDA_MMA=1 (or 3) asks
// for it (read at every call); else the bf16 planes serve.
bool block_mma_fits(DType dtype, int rows, int cols);
// For each slot j < slots: y[j slot_stride + i rows + r] = x[64 j + i, :] . W_j[r, :] for i < 64 with
// 64 j + i < valid, r < rows; W_j at ws[j] (a device array of `slots` device pointers) in dtype
// with rows row_bytes apart, x's planes (quantize_x8) over 64 slots rows. Integer products of the
// codes and both planes, scaled in fp32 (codes_dot's arithmetic: ~2e-5 relative).
void block_mma_products(const std::byte* const* ws, int slots, DType dtype, std::size_t row_bytes, int rows, int cols,
                        const X8& x, int valid, float* y, std::size_t slot_stride, cudaStream_t s);

// Whether decode products on `dtype` take int8 activations: Q4_K / Q5_K / Q6_K / Q4_0 / Q8_0 (block_units.h's
// has_codes) do by default (~2e-5 relative where fp32 activations give ~1e-7); FT_CUDA_INT8=0 keeps
// them on fp32 activations.
bool int8_products(DType dtype);

// Rows of x a gemv call takes at most.
inline constexpr int kGemvMaxRows = 8;
// Whether gemv_bf16 can read this weight (16-byte aligned rows of a multiple of 8 columns).
bool gemv_fits(const std::byte* w, std::size_t row_bytes, int64_t cols);
// One product of a gemv call: y [T, rows] = x [T, cols] w^T (+ bias), w [rows, cols] (bf16, fp32
// where f32 says, or the block dtype of a gemv_units_batch call) with row stride row_bytes.
struct GemvOut {
  const std::byte* w = nullptr;
  std::size_t row_bytes = 0;
  int rows = 0;
  const float* bias = nullptr;
  float* y = nullptr;
  bool f32 = false;  // fp32 weights (16-byte aligned rows), else bf16
};
// GGUF block dtypes (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, MXFP4), decoded 32 values at a time with
// ggml's arithmetic (block_dequant.h). `cols` is a multiple of the block's values.
bool is_block_dtype(DType dtype);
// The embedding rows of `ids` from a table in a block dtype.
void embedding_blocks(const std::byte* table, DType dtype, std::size_t row_bytes, int64_t cols, const int32_t* ids,
                      int T, float* out, cudaStream_t s);
// y [T, rows] = x [T, cols] w^T (+ bias) for T <= kGemvMaxRows: the decode product, one warp a row.
void gemv_blocks(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, const float* x, int T,
                 const float* bias, float* y, cudaStream_t s);
// The same on the types with 256-value units (Q4_K, Q5_K, Q6_K, Q4_0, Q8_0, FP8, NVFP4: block_units.h): wide loads,
// scales applied per group; units_fit says whether w's rows allow it (alignment, whole units).
// gemv_blocks takes this path by itself where it fits.
bool units_fit(DType dtype, const std::byte* w, std::size_t row_bytes, int cols);
void gemv_units(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, const float* x, int T,
                const float* bias, float* y, cudaStream_t s);
// Up to kGemvMaxOuts such products of one dtype and width over the same x in one launch (a DeltaNet
// layer's q|k|v, z, b and a; a shared expert's gate and up), GemvOut's w in that dtype (f32 unused):
// each is the same as gemv_units alone.
// xq: x as int8 planes (quantize_x8), taken where int8_products(dtype); else x.
void gemv_units_batch(const GemvOut* outs, int n_outs, DType dtype, int cols, const float* x, int T, cudaStream_t s,
                      const X8* xq = nullptr);
// w's rows [0, rows) as bf16 planes hi and lo, each [rows, cols], w ~= hi + lo: the tiles a
// prefill-sized product hands to cuBLAS.
void dequant_split_rows(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, std::uint16_t* hi,
                        std::uint16_t* lo, cudaStream_t s);
// The same for `count` matrices of one shape in one launch: matrix j (device pointer ws[j]) into
// hi / lo + j * rows * cols.
void dequant_split_matrices(const std::byte* const* ws, int count, DType dtype, std::size_t row_bytes, int rows,
                            int cols, std::uint16_t* hi, std::uint16_t* lo, cudaStream_t s);
// w's rows [0, rows) as one fp16 plane [rows, cols] (each weight to ~2^-11), and `count` matrices so
// in one launch (matrix j into out + j * rows * cols): the tiles of the one-plane fp16 products.
void dequant_f16_rows(const std::byte* w, DType dtype, std::size_t row_bytes, int rows, int cols, std::uint16_t* out,
                      cudaStream_t s);
void dequant_f16_matrices(const std::byte* const* ws, int count, DType dtype, std::size_t row_bytes, int rows, int cols,
                          std::uint16_t* out, cudaStream_t s);
// How prefill-sized products on block weights run where the int8 tiles (FT_CUDA_MMA) do not take
// them: false, the bf16 planes (weights and x each split hi + lo, three GEMMs: ~2^-16); true, one
// fp16 plane of each and one GEMM (~2^-11 a factor, as llama.cpp's cuBLAS path multiplies): a third
// of the tensor-core work and half the decoded bytes. By default a MoE's routed experts take the
// fp16 plane and every other product (attention, dense MLPs, shared experts, lm_head) the planes:
// the GGUF fixtures' logits then sit 2.4-6.3e-4 from their dequantised weights' (fp16 for every
// product: 1.3-1.6e-3, the dense products' share; the bound is 1e-3), and the experts are
// most of a prefill's products. FT_CUDA_BLOCK_GEMM=planes puts the experts on the planes too, =f16
// every product on fp16. Read at every call, so that a test can switch it.
enum class BlockProducts { kDense, kExperts };
bool f16_block_products(BlockProducts kind);

inline constexpr int kGemvMaxOuts = 4;
// Up to kGemvMaxOuts products of the same x [T, cols] (q, k and v; gate and up) in one launch;
// T <= kGemvMaxRows.
void gemv_bf16(const GemvOut* outs, int n_outs, int cols, const float* x, int T, cudaStream_t s);

// A token's choices in ascending expert order (the order the down kernel adds them in, as the CPU
// backends do): the expert, the (token, choice) pair whose row of h it reads, and its weight;
// [T, top_k] each.
struct ChoicesByExpert {
  int32_t* expert = nullptr;
  int32_t* pair = nullptr;
  float* weight = nullptr;
};
// What the router's top-k does (ref::route_top_k: softmax over all E, or sigmoid scores; top-k with
// ties to the lower index; renormalised when `renormalize`; times `scaling`; with `grouped`,
// DeepSeek-V3's choice by score + bias among the topk_group best of n_group groups, either scoring)
// and where its results go: chosen [T, top_k] int32 and weights [T, top_k] fp32 in rank order, and
// by_expert when its pointers are set. E <= 8192, top_k <= 32, n_group <= kRouteMaxGroups.
inline constexpr int kRouteMaxGroups = 64;
struct RouteSpec {
  int E = 0;
  int top_k = 0;
  bool sigmoid = false;
  bool renormalize = false;
  float scaling = 1.f;
  bool grouped = false;
  int n_group = 1;
  int topk_group = 1;
  const float* bias = nullptr;  // [E] device, or null (+ 0)
  const float* per_expert_scale = nullptr;  // [E] device, or null (1): each chosen weight times it
  int32_t* chosen = nullptr;
  float* weights = nullptr;
  ChoicesByExpert by_expert;
};
// The router of a decode step in one launch: logits = router.w x (gemv_bf16's product, T <=
// kGemvMaxRows, router.y [T, router.rows] with router.rows = r.E), then the last of its blocks to
// finish routes every token. `done`: a device counter at zero, left at zero.
void gemv_route(const GemvOut& router, int cols, const float* x, int T, const RouteSpec& r, unsigned* done,
                cudaStream_t s);

// The routed experts of a few tokens without the host: the choices stay on the device.
// Device arrays of the E experts' bf16 matrices (row 0 of each); all gate/up share a row stride,
// as all downs do.
struct ExpertTable {
  const std::byte* const* gate = nullptr;
  const std::byte* const* up = nullptr;
  const std::byte* const* down = nullptr;
  std::size_t gate_up_row_bytes = 0;
  std::size_t down_row_bytes = 0;
  int hidden = 0;  // H: gate/up columns, down rows
  int inter = 0;   // I: gate/up rows, down columns
  ExpertEpilogue act;  // the GLU and biases
  // BF16, or a GGUF block dtype (the decode kernels then decode the blocks; the prefill GEMMs take
  // bf16 planes decoded from them a few experts at a time).
  DType gate_up_dtype = DType::kBF16;
  DType down_dtype = DType::kBF16;
  // Every expert's gate/up (down) rows fit the unit kernels (units_fit): the block kernels use them.
  bool gate_up_units = false;
  bool down_units = false;
};
// ---- Misses read in place, staged (in_place_staging.cu) ----------------------------------------
// One staged expert's layout: its matrices' bytes and their offsets in a slot (the cache slots').
struct StagedExpert {
  std::size_t bytes[3] = {0, 0, 0};   // gate, up, down
  std::size_t offset[3] = {0, 0, 0};  // within a slot
  std::size_t slot_bytes = 0;
};
// A layer's table (3 * E pointers: gate, up, down) into `out`, where every expert among the first
// n choices (`chosen`) whose entry names host memory (`from_host`, E flags) is first copied into
// `staging` (slot j for its first choice j; n slots, 256-byte aligned) and named there: the expert
// kernels then read it from device memory. Device-side only, so a recorded step replays it.
void stage_missed_experts(const std::byte* const* table, const std::uint8_t* from_host, int E, const int32_t* chosen,
                          int n, const StagedExpert& shape, std::byte* staging, const std::byte** out, cudaStream_t s);
// The next layer's experts copied ahead (misses read in place): of the distinct experts among
// `predicted` (n choices of the next layer's router) whose entry in `table` names host memory, the
// first `most` are copied by wide loads into slots[0..most) (device array of slot starts), and
// `out` (3 E pointers) / out_from_host (E flags) become the table with those experts in their slots.
void stage_ahead(const std::byte* const* table, const std::uint8_t* from_host, int E, const int32_t* predicted, int n,
                 int most, const StagedExpert& shape, std::byte* const* slots, const std::byte** out,
                 std::uint8_t* out_from_host, cudaStream_t s);

// h [T * top_k, inter]: for choice i of token t (row t * top_k + i), the table's GLU of
// gate_e x_t and up_e x_t (with e's biases, where it has them) for e = chosen[t * top_k + i].
void moe_gate_up(const ExpertTable& experts, const float* x, int T, int top_k, const int32_t* chosen, float* h,
                 cudaStream_t s, const X8* xq = nullptr);
// out [T, hidden] = sum over token t's choices in ascending expert order (by_expert, as the router
// wrote it) of weight * (down_e h[pair] + e's down bias, where it has one). top_k <= 32.
void moe_down_combine(const ExpertTable& experts, const float* h, int T, int top_k, const ChoicesByExpert& by_expert,
                      float* out, cudaStream_t s, const X8* hq = nullptr);
// moe_gate_up / moe_down_combine for tables whose gate/up (or down) matrices are in a block dtype:
// the same products and order, the weights decoded in registers.
void moe_gate_up_blocks(const ExpertTable& experts, const float* x, int T, int top_k, const int32_t* chosen, float* h,
                        cudaStream_t s, const X8* xq = nullptr);
void moe_down_combine_blocks(const ExpertTable& experts, const float* h, int T, int top_k,
                             const ChoicesByExpert& by_expert, float* out, cudaStream_t s, const X8* hq = nullptr);
// Their unit versions (block_unit_kernels.cu), for tables whose gate_up_units / down_units hold.
// xq / hq: x / h as int8 planes (quantize_x8), taken where int8_products(dtype).
void moe_gate_up_units(const ExpertTable& experts, const float* x, int T, int top_k, const int32_t* chosen, float* h,
                       cudaStream_t s, const X8* xq = nullptr);
void moe_down_combine_units(const ExpertTable& experts, const float* h, int T, int top_k,
                            const ChoicesByExpert& by_expert, float* out, cudaStream_t s, const X8* hq = nullptr);

// ---- Sampling (sample_kernels.cu) -----------------------------------------------------------------

// One row's sampling parameters and the host's uniform draw u in [0, 1) (SamplingParams + u).
struct SampleRowDev {
  int row;  // of the logits
  float temperature;
  int top_k;
  float top_p;
  float min_p;
  int greedy;
  double u;
};
// tokens[i] = the token drawn from logits row params[i].row ([.., vocab]) per params[i] (Backend::sample).
void sample_rows(const float* logits, int rows, int vocab, const SampleRowDev* params, int32_t* tokens,
                 cudaStream_t s);

// ---- Attention (attention_kernels.cu) ------------------------------------------------------------

// One sequence of a batched attention call, in device memory. Its rows are row0 .. row0 + rows - 1
// of q / k / v / out, at positions pos0 .. ; its page table is pages[page0 ..] (enough pages for
// pos0 + rows positions).
struct AttnSeqDev {
  int32_t row0 = 0;
  int32_t rows = 0;
  int32_t pos0 = 0;
  int32_t page0 = 0;
};

// Rotates the first rotary_dim dims of every head of x [T, heads, head_dim] in place (ref::apply_rope
// with per-row positions[t]; NeoX or GPT-J pairing from spec.layout). inv_freq [rotary_dim / 2].
void rope(float* x, int T, int heads, const ref::RopeSpec& spec, const float* inv_freq, const int64_t* positions,
          cudaStream_t s);
// ref::split_gated_query.
void split_gated_query(const float* qg, int T, int heads, int head_dim, float* q, float* gate, cudaStream_t s);
// ref::kv_write for every sequence: k, v [T, kv_heads, head_dim] fp32 -> the bf16 pages of layer
// `layer`. row_seq [T]: the sequence of each row. layout.dtype must be kBf16.
void kv_write(const KvLayout& layout, int layer, const float* k, const float* v, int T, const int32_t* row_seq,
              const AttnSeqDev* seqs, std::byte* const* pages, cudaStream_t s);
// Backend::attention_inputs in one launch: per-head RMSNorm of q and k (when norm is given), RoPE,
// then k, v into the pages as kv_write does. false (nothing enqueued): a shape it does not take
// (head_dim > 256, rope.head_dim != head_dim, KV not bf16), for the caller to do op by op.
struct QkNormDev {
  const float* q;  // [head_dim]
  const float* k;
  float eps;
  bool zero_centered;
};
bool attention_inputs_fit(const KvLayout& layout, int layer, const ref::RopeSpec& rope);
bool attention_inputs(const KvLayout& layout, int layer, float* q, float* k, const float* v, int T, int heads,
                      const QkNormDev* norm, const ref::RopeSpec& rope, const float* inv_freq,
                      const int64_t* positions, const int32_t* row_seq, const AttnSeqDev* seqs,
                      std::byte* const* pages, cudaStream_t s);
// Causal GQA attention (ref::causal_attention over the paged KV, the new rows already written):
// q [T, heads, head_dim] -> out [T, heads, head_dim], softmax(q.k * scale) in fp32, with opt's
// sliding window and sinks (device memory). max_ctx: the longest pos0 + rows of any sequence (host
// value, for the launch shape). work: device memory of paged_attention_workspace(...) floats (or
// null), where decode rows over long contexts keep the partial states of their keys' splits
// (attention_plan.h); split_done: kAttnSplitCounters device counters at zero, left at zero, which
// tell the last split of a row to finish (with less workspace or no counters, the call runs unsplit).
std::size_t paged_attention_workspace(const KvLayout& layout, int layer, int T, int heads, const AttentionOptions& opt,
                                      int max_ctx);
void paged_attention(const KvLayout& layout, int layer, const float* q, int T, int heads, float scale,
                     const AttentionOptions& opt, const int32_t* row_seq, const AttnSeqDev* seqs, int max_ctx,
                     std::byte* const* pages, float* out, float* work, std::size_t work_floats, unsigned* split_done,
                     cudaStream_t s);

// ---- DeepSeek sparse attention (dsa_kernels.cu) ---------------------------------------------------

// ref::layer_norm over `rows` rows of dim (out may alias x): the statistics in double and the rest
// in fp32 without contraction, as the reference computes them.
void layer_norm(const float* x, const float* w, const float* b, float* out, int rows, int dim, float eps,
                cudaStream_t s);
// One query row of an indexer_scores call: its scores go to scores[offset - base ..], one for each
// of its sequence's positions 0 .. keys - 1 (keys = its position + 1; 0 for a row of no sequence).
// seq indexes the call's AttnSeqDev array.
struct IndexRowDev {
  int64_t offset = 0;
  int32_t keys = 0;
  int32_t seq = 0;
};
// The widest index key the scores kernel holds.
inline constexpr int kIndexMaxDim = 256;
// Whether indexer_scores takes this layout and indexer (bf16 KV, spec.head_dim <= kIndexMaxDim, the
// key's slots inside the layer's).
bool indexer_scores_fit(const KvLayout& layout, int layer, const IndexerSpec& spec);
// The lightning indexer's scores (ref::indexer_scores, bit for bit) of rows row0 .. row0 + rows - 1
// of q [T, spec.heads, spec.head_dim] and w [T, spec.heads] against the index keys (bf16) in K slot
// spec.kv_slot (and after) of layer `layer`: a row's key j at position j * rate + rate - 1 (rate 1:
// every position, DeepSeek sparse attention; DeepSeek-V4's CSA: compressed entry j at the position
// closing its window). row_info [T] says where each row's scores go and how many; max_keys: the
// most keys of these rows (host value, for the grid).
void indexer_scores(const KvLayout& layout, int layer, const float* q, const float* w, const IndexerSpec& spec,
                    int rate, int row0, int rows, const IndexRowDev* row_info, int64_t base, int max_keys,
                    const AttnSeqDev* seqs, std::byte* const* pages, float* scores, cudaStream_t s);
// Backend::sparse_attention (ref::sparse_attention_row for every row): q [T, heads, head_dim] over
// the positions selected [T, top_k] (-1: none) of each row's sequence (row_seq, seqs and pages as
// paged_attention's), query head h against kv head h; softmax in fp32 -> out [T, heads, head_dim].
// false (nothing enqueued): a shape it does not take (KV not bf16, head_dim not a multiple of 32 up
// to 256, top_k past the shared memory).
bool sparse_attention(const KvLayout& layout, int layer, const float* q, int T, int heads, float scale,
                      const int32_t* selected, int top_k, const int32_t* row_seq, const AttnSeqDev* seqs,
                      std::byte* const* pages, float* out, cudaStream_t s);

// ---- Gated DeltaNet (deltanet_kernels.cu) --------------------------------------------------------

// One sequence of a batched DeltaNet call, in device memory: rows row0 .. row0 + rows - 1 and its
// state (conv [conv_dim, K-1], recurrent [num_v_heads, head_k_dim, head_v_dim], updated in place).
struct DeltaNetSeqDev {
  int32_t row0 = 0;
  int32_t rows = 0;
  float* conv = nullptr;
  float* recurrent = nullptr;
};
// The layer's fp32 parameters, device memory (Backend::DeltaNetParams with device pointers).
struct DeltaNetParamsDev {
  const float* conv1d = nullptr;   // [conv_dim, K]
  const float* dt_bias = nullptr;  // [num_v_heads]
  const float* A_log = nullptr;    // [num_v_heads]
  const float* norm = nullptr;     // [head_v_dim]
};
// ref::deltanet_unfuse.
void deltanet_unfuse(const ref::DeltaNetDims& dims, const float* qkvz, const float* ba, int T, float* qkv, float* z,
                     float* b, float* a, cudaStream_t s);
// Backend::deltanet for `nseq` sequences (seqs in device memory, T rows in all, max_rows the
// longest sequence's rows, host value): causal conv1d + SiLU with state, the gates, the gated delta
// rule (recurrent form, state updated), the gated RMSNorm with z -> out [T, value_dim]. `work` is
// device scratch of at least deltanet_work_floats(dims, T) floats.
std::size_t deltanet_work_floats(const ref::DeltaNetDims& dims, int T);
void deltanet(const ref::DeltaNetDims& dims, const DeltaNetParamsDev& params, const float* qkv, const float* z,
              const float* b, const float* a, const DeltaNetSeqDev* seqs, int nseq, int T, int max_rows, float* work,
              float* out, cudaStream_t s);

// ---- Mixture of experts (dense_kernels.cu, gemv_kernels.cu) -------------------------------------

// Router: logits [T, E] -> each token's top_k experts and their weights (RouteSpec), one warp a token.
void route_top_k(const float* logits, int T, const RouteSpec& r, cudaStream_t s);
// Grouping a prefill's choices by expert on the device. moe_count: counts[e] += the choices of
// expert e (counts zeroed by the caller). moe_scatter: with row0[e] the first of the padded rows
// set aside for expert e, each token's choices in ascending expert order get the next free row of
// their expert (cursor: zeroed, one per expert): padded[row] = t, and rows / weights [T, top_k]
// list each token's padded rows and weights in that order (moe_combine's input). Which free row a
// token gets depends on scheduling; a GEMM row's result does not, so neither does the output.
void moe_count(const int32_t* chosen, int n, int32_t* counts, cudaStream_t s);
void moe_scatter(const int32_t* chosen, const float* weights, int T, int top_k, const int32_t* row0, int32_t* cursor,
                 int64_t* padded, int32_t* rows, float* sorted_weights, cudaStream_t s);
// out[t, :] = sum over i < top_k of weights[t * top_k + i] * y[rows[t * top_k + i], :], added in
// i order (the caller orders each token's choices by expert id, as the CPU backends add them).
void moe_combine(const float* y, const int32_t* rows, const float* weights, int T, int top_k, int width,
                 float* out, cudaStream_t s);
// moe_combine of y fp32 in the slot layout (the batched experts' down products): row r is the sum
// of its high and low parts.
void moe_combine_split(const float* y, const int32_t* rows, const float* weights, int T, int top_k, int width,
                       int slot_rows, float* out, cudaStream_t s);
// out[t, :] += sigmoid(gate[t]) * y[t, :] (the shared expert).
void add_sigmoid_scaled(const float* y, const float* gate, int T, int width, float* out, cudaStream_t s);

}  // namespace ft::engine::cuda
