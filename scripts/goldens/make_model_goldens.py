#!/usr/bin/env python3
"""Reference data for the engine's golden tests, made with HF transformers (no download).

For each architecture: random-initialise the model from a shrunken config, scale the init up so
outputs are not near zero (N(0, 1/fan_in) for matrices, N(0, 1) embeddings, small random offsets
on norms and biases, random router correction biases), save it with save_pretrained in bf16,
reload that bf16 checkpoint in float32 on the CPU (GPU float32 may use TF32), and record logits for
random token ids plus a greedy continuation.

Writes OUT/<name>/checkpoint/{config.json,generation_config.json,model.safetensors} and
OUT/<name>/golden.safetensors with input_ids (I64 [T]), logits (F32 [T, vocab]), greedy_ids (I64 [G]).

  python3 scripts/goldens/make_model_goldens.py --out tests/fixtures/models [--only qwen3_moe olmoe ...]

The names are the HF model_types: qwen3_moe, qwen3_next, qwen3_5_moe, mixtral, qwen2_moe, olmoe,
deepseek_v3, glm4_moe, dots1, ernie4_5_moe, minimax_m2, gpt_oss, hunyuan_v1_moe, glm4_moe_lite,
exaone_moe, afmoe, deepseek_v32, glm_moe_dsa, gemma4_text, llama4_text (the families the engine
runs; the default), and, made ahead for a family not yet in the engine: deepseek_v4 (integer
tables, such as its hash routing, are kept in the recipe as their values). A family that fails is
reported and the others are still made. The fixtures are made with --recipe.
"""
import argparse
import glob
import json
import os
import shutil
import traceback
import zlib

import torch
import transformers
from safetensors.torch import load_file, save_file

import golden_weights

VOCAB = 1024
T = 100          # > one DeltaNet chunk (64), so chunked prefill crosses a chunk boundary
NEW_TOKENS = 16
EOS = VOCAB - 1


def qwen3_moe():
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        num_experts=16, num_experts_per_tok=4, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[2], rms_norm_eps=1e-6, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0)
    return cfg, transformers.Qwen3MoeForCausalLM


def qwen3_next():
    cfg = transformers.Qwen3NextConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
        shared_expert_intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, linear_conv_kernel_dim=4, linear_key_head_dim=32,
        linear_value_head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
        num_experts=16, num_experts_per_tok=4, norm_topk_prob=True, decoder_sparse_step=1,
        rms_norm_eps=1e-6, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0)
    return cfg, transformers.Qwen3NextForCausalLM


def qwen3_5_moe():
    text = dict(
        vocab_size=VOCAB, hidden_size=128, moe_intermediate_size=64,
        shared_expert_intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, linear_conv_kernel_dim=4, linear_key_head_dim=32,
        linear_value_head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
        num_experts=16, num_experts_per_tok=4, rms_norm_eps=1e-6, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [2, 3, 3], "mrope_interleaved": True},
        eos_token_id=EOS, bos_token_id=0)
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=128,
                  num_position_embeddings=64)
    cfg = transformers.Qwen3_5MoeConfig(text_config=text, vision_config=vision, tie_word_embeddings=False)
    return cfg, transformers.Qwen3_5MoeForConditionalGeneration


def mixtral():
    # Mixtral-8x7B's shape in small: 8 experts top-2, experts intermediate_size wide, no sliding window.
    cfg = transformers.MixtralConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_local_experts=8,
        num_experts_per_tok=2, sliding_window=None, rms_norm_eps=1e-5, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0)
    return cfg, transformers.MixtralForCausalLM


def qwen2_moe():
    # Qwen1.5-MoE's shape in small: q/k/v biases (qkv_bias defaults on), a gated shared expert,
    # norm_topk_prob off, a dense layer. head_dim is hidden_size / num_attention_heads (no key).
    cfg = transformers.Qwen2MoeConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
        shared_expert_intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, num_experts=16, num_experts_per_tok=4, norm_topk_prob=False,
        decoder_sparse_step=1, mlp_only_layers=[2], use_sliding_window=False, rms_norm_eps=1e-6,
        max_position_embeddings=4096, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0)
    return cfg, transformers.Qwen2MoeForCausalLM


def olmoe():
    # OLMoE's shape in small: q_norm / k_norm over the whole q and k projections (GQA here, so the two
    # widths differ), experts intermediate_size wide, norm_topk_prob off, no clip_qkv.
    cfg = transformers.OlmoeConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, num_experts=16, num_experts_per_tok=4,
        norm_topk_prob=False, attention_bias=False, clip_qkv=None, rms_norm_eps=1e-5,
        max_position_embeddings=4096, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0, pad_token_id=None)
    return cfg, transformers.OlmoeForCausalLM


def deepseek_v3():
    # DeepSeek-V3's shape in small: latent attention with the q LoRA, keys 64 wide (32 nope + 32
    # rope, interleaved as the released checkpoints) and values 32 (the engine pads them to 64 in its
    # KV pages); YaRN x4 over an original context of 64 (the test's 116 positions run past it) with
    # mscale != mscale_all_dim, so both the cos/sin factor and the softmax scale's mscale^2 matter
    # (max_position_embeddings = factor * original, so transformers 4.x and 5.x agree on the factor);
    # 16 experts in 4 groups (top-2 groups, top-4 experts), a shared expert, layer 0 dense.
    cfg = transformers.DeepseekV3Config(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1,
        n_routed_experts=16, routed_scaling_factor=2.5, kv_lora_rank=64, q_lora_rank=96,
        qk_rope_head_dim=32, v_head_dim=32, qk_nope_head_dim=32, n_group=4, topk_group=2,
        num_experts_per_tok=4, first_k_dense_replace=1, norm_topk_prob=True, rms_norm_eps=1e-6,
        max_position_embeddings=256,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
                         "mscale": 1.0, "mscale_all_dim": 0.707},
        rope_interleave=True, attention_bias=False, tie_word_embeddings=False, eos_token_id=EOS,
        bos_token_id=0)
    return cfg, transformers.DeepseekV3ForCausalLM


def glm4_moe():
    # GLM-4.5's shape in small: GQA with q/k/v biases (none on o_proj), RoPE on half of each head,
    # per-head q/k norms, 16 experts top-4 in one group (as the releases: the correction bias alone
    # steers the choice), a shared expert, layer 0 dense.
    cfg = transformers.Glm4MoeConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        partial_rotary_factor=0.5, n_shared_experts=1, n_routed_experts=16, routed_scaling_factor=2.5,
        n_group=1, topk_group=1, num_experts_per_tok=4, first_k_dense_replace=1, norm_topk_prob=True,
        use_qk_norm=True, attention_bias=True, rms_norm_eps=1e-5, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0)
    return cfg, transformers.Glm4MoeForCausalLM


def dots1():
    # dots.llm1's shape in small: Qwen3's attention (per-head q/k norms; head_dim hidden / heads, as
    # Dots1Config has no key for it) with DeepSeek-V3's MoE: 16 experts top-4 in 2 groups of which 1
    # is chosen, 2 shared experts, norm_topk_prob off, routed_scaling_factor 2, layer 0 dense, no
    # sliding window.
    cfg = transformers.Dots1Config(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, n_shared_experts=2,
        n_routed_experts=16, n_group=2, topk_group=1, num_experts_per_tok=4, first_k_dense_replace=1,
        norm_topk_prob=False, routed_scaling_factor=2.0, rms_norm_eps=1e-6, max_position_embeddings=4096,
        sliding_window=None, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        attention_bias=False, tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0)
    return cfg, transformers.Dots1ForCausalLM


def ernie4_5_moe():
    # ERNIE-4.5-21B-A3B's shape in small: GQA with RoPE on interleaved pairs, no biases (use_bias
    # off), tied embeddings, 16 experts top-4 chosen by softmax score + correction bias, 2 shared
    # experts, MoE on layers 1 and 3 (moe_layer_start_index 1, interval 2), 0 and 2 dense.
    cfg = transformers.Ernie4_5_MoeConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, rms_norm_eps=1e-5,
        tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        use_bias=False, moe_intermediate_size=64, moe_k=4, moe_num_experts=16, moe_num_shared_experts=2,
        moe_layer_start_index=1, moe_layer_end_index=-1, moe_layer_interval=2, eos_token_id=EOS,
        bos_token_id=0, pad_token_id=0)
    return cfg, transformers.Ernie4_5_MoeForCausalLM


def minimax_m2():
    # MiniMax-M2's shape in small: q/k norms over the whole projections, RoPE on half of each head,
    # no biases, 16 experts top-4 (intermediate_size wide) chosen by sigmoid score + correction
    # bias and renormalised, every layer MoE, no shared expert.
    cfg = transformers.MiniMaxM2Config(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_local_experts=16,
        num_experts_per_tok=4, rms_norm_eps=1e-6, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.5},
        tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0)
    return cfg, transformers.MiniMaxM2ForCausalLM


ARCHS = {"qwen3_moe": qwen3_moe, "qwen3_next": qwen3_next, "qwen3_5_moe": qwen3_5_moe,
         "mixtral": mixtral, "qwen2_moe": qwen2_moe, "olmoe": olmoe,
         "deepseek_v3": deepseek_v3, "glm4_moe": glm4_moe, "dots1": dots1, "ernie4_5_moe": ernie4_5_moe,
         "minimax_m2": minimax_m2}


# The later families (and deepseek_v4, made ahead of the engine's support so its composition can be
# checked the day it is written): configs through AutoConfig by model_type (every class lives in
# transformers 5.17); shapes shrunk as above, windows (16) and selections (index_topk 16) smaller
# than the 100 tokens so they bite.
COMMON = dict(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, rms_norm_eps=1e-5,
              max_position_embeddings=4096, tie_word_embeddings=False, eos_token_id=EOS, bos_token_id=0,
              pad_token_id=0)
ROPE = {"rope_type": "default", "rope_theta": 10000.0}


def auto(model_type, **kw):
    return transformers.AutoConfig.for_model(model_type, **{**COMMON, **kw}), transformers.AutoModelForCausalLM


def gpt_oss():
    # Attention sinks, alternating sliding/full attention, YaRN, biased experts with the clamped
    # SwiGLU, softmax over the top-k.
    return auto("gpt_oss", intermediate_size=64, num_key_value_heads=2, head_dim=32, num_local_experts=16,
                num_experts_per_tok=4, sliding_window=16, attention_bias=True,
                layer_types=["sliding_attention", "full_attention"] * 2,
                rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                 "truncate": False, "original_max_position_embeddings": 4096,
                                 "rope_theta": 150000.0},
                max_position_embeddings=131072)


def hunyuan_v1_moe():
    return auto("hunyuan_v1_moe", intermediate_size=64, num_key_value_heads=2, head_dim=32, num_experts=16,
                moe_topk=4, rope_parameters=ROPE, attention_bias=False)


def glm4_moe_lite():
    # GLM-4.7-Flash: MLA (q and kv LoRA) with interleaved RoPE, DeepSeek-V3's router, layer 0 dense.
    return auto("glm4_moe_lite", intermediate_size=256, moe_intermediate_size=64, num_key_value_heads=4,
                n_shared_experts=1, n_routed_experts=16, routed_scaling_factor=1.8, kv_lora_rank=32,
                q_lora_rank=48, qk_rope_head_dim=16, v_head_dim=32, qk_nope_head_dim=32, n_group=1, topk_group=1,
                num_experts_per_tok=4, norm_topk_prob=True, rope_interleave=True, rope_parameters=ROPE,
                mlp_layer_types=["dense", "sparse", "sparse", "sparse"])


def exaone_moe():
    return auto("exaone_moe", intermediate_size=256, num_key_value_heads=2, head_dim=32, sliding_window=16,
                layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
                mlp_layer_types=["dense", "sparse", "sparse", "sparse"], first_k_dense_replace=1,
                moe_intermediate_size=64, num_experts=16, num_experts_per_tok=4, num_shared_experts=1,
                norm_topk_prob=True, routed_scaling_factor=2.5, n_group=1, topk_group=1, rope_parameters=ROPE)


def afmoe():
    return auto("afmoe", intermediate_size=256, moe_intermediate_size=64, num_dense_layers=1,
                num_key_value_heads=2, head_dim=32, num_experts=16, num_experts_per_tok=4, num_shared_experts=1,
                global_attn_every_n_layers=2, sliding_window=16, rope_parameters=ROPE)


def deepseek_v32():
    # MLA + the DSA indexer choosing 16 of the positions for each query. 16 indexer heads (the
    # releases have 64): with few heads the ReLU'd scores are often all zero, and such exact ties
    # make the choice depend on the pass (HF breaks them by its sort over the pass's row).
    return auto("deepseek_v32", intermediate_size=256, moe_intermediate_size=64, num_key_value_heads=4,
                n_shared_experts=1, n_routed_experts=16, routed_scaling_factor=2.5, kv_lora_rank=32,
                q_lora_rank=48, qk_rope_head_dim=16, v_head_dim=32, qk_nope_head_dim=32, head_dim=16, n_group=4,
                topk_group=2, num_experts_per_tok=4, first_k_dense_replace=1, index_topk=16, index_head_dim=32,
                index_n_heads=16, rope_parameters=ROPE, rms_norm_eps=1e-6,
                mlp_layer_types=["dense", "sparse", "sparse", "sparse"])


def glm_moe_dsa():
    return auto("glm_moe_dsa", intermediate_size=256, moe_intermediate_size=64, num_key_value_heads=4,
                n_shared_experts=1, n_routed_experts=16, routed_scaling_factor=2.5, kv_lora_rank=32,
                q_lora_rank=48, qk_rope_head_dim=16, v_head_dim=32, qk_nope_head_dim=32, head_dim=16, n_group=1,
                topk_group=1, num_experts_per_tok=4, first_k_dense_replace=1, index_topk=16, index_head_dim=32,
                index_n_heads=16, rope_parameters=ROPE, mlp_layer_types=["dense", "sparse", "sparse", "sparse"])


def gemma4_text():
    # Gemma 4's MoE text model (26B-A4B's layout): sliding layers, and full layers with wider heads
    # (global_head_dim), fewer KV heads, one projection for K and V (attention_k_eq_v) and
    # proportional RoPE; a dense GeGLU beside the MoE in every layer; embeddings scaled by
    # sqrt(hidden_size), tied, and the final logits softcapped (at 5, not the releases' 30, so the cap bends these
    # logits). No per-layer embeddings (the dense E2B/E4B models' feature).
    return auto("gemma4_text", intermediate_size=256, num_key_value_heads=2, head_dim=32, global_head_dim=64,
                num_global_key_value_heads=1, attention_k_eq_v=True, sliding_window=16,
                layer_types=["sliding_attention", "full_attention"] * 2, enable_moe_block=True, num_experts=16,
                top_k_experts=4, moe_intermediate_size=64, final_logit_softcapping=5.0,
                hidden_size_per_layer_input=0, tie_word_embeddings=True,
                rope_parameters={"sliding_attention": ROPE,
                                 "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                    "rope_theta": 1000000.0}}, rms_norm_eps=1e-6)


def llama4_text():
    return auto("llama4_text", intermediate_size=64, intermediate_size_mlp=256, num_key_value_heads=2,
                head_dim=32, num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1,
                attention_chunk_size=16, use_qk_norm=True, rope_parameters={"rope_type": "default",
                                                                            "rope_theta": 500000.0})


def deepseek_v4():
    # Every layer kind (sliding window 16; compressed sparse attention: an entry per 4 tokens, the
    # indexer keeping 8 of the 25; heavily compressed: an entry per 16 tokens, 6 of them) and both
    # router kinds (hash, then scored); the clamp at 1.5 so it bites on unit pre-activations; YaRN
    # on the compress rope (docs/deepseek-v4.md, section 8).
    return auto("deepseek_v4", moe_intermediate_size=64, head_dim=64, q_lora_rank=48, num_experts_per_tok=4,
                n_routed_experts=16, o_groups=2, o_lora_rank=32, index_n_heads=16, index_head_dim=32, index_topk=8,
                sliding_window=16, compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
                layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                             "compressed_sparse_attention"],
                mlp_layer_types=["hash_moe", "moe", "moe", "moe"], partial_rotary_factor=0.25, swiglu_limit=1.5,
                rope_parameters={"rope_type": "yarn", "factor": 16.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                 "original_max_position_embeddings": 256},
                num_nextn_predict_layers=0, rms_norm_eps=1e-6)


ARCHS.update({"gpt_oss": gpt_oss, "hunyuan_v1_moe": hunyuan_v1_moe, "glm4_moe_lite": glm4_moe_lite,
              "exaone_moe": exaone_moe, "afmoe": afmoe, "deepseek_v32": deepseek_v32, "glm_moe_dsa": glm_moe_dsa,
              "gemma4_text": gemma4_text, "llama4_text": llama4_text})
AHEAD = {"deepseek_v4": deepseek_v4}



@torch.no_grad()
def scale_init(model, gen):
    """Replace the tiny default init so every op contributes visibly to the logits."""
    for name, p in model.named_parameters():
        if p.ndim >= 2:
            if "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
        elif name.endswith("A_log") or name.endswith("dt_bias"):
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
        elif "bias" in name:
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        else:  # norm weights: stored as w (init 1) or as an offset from 1 (init 0)
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    # The DeepSeek-V3 router's score-correction bias is a buffer (zeros at init): random, so the
    # choice it steers is tested. Drawn after the parameters, so the other families' draws are
    # unchanged.
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.copy_(0.1 * torch.randn(b.shape, generator=gen))


@torch.no_grad()
def hash_tables(model, gen):
    """DeepSeek-V4's hash routing reads a token's experts from a table (tid2eid [vocab, top_k], zeros
    at init: every token would choose expert 0 top_k times): top_k distinct random experts a token."""
    for name, t in list(model.named_buffers()) + list(model.named_parameters()):
        if name.endswith("tid2eid"):
            E = model.config.n_routed_experts
            rows = [torch.randperm(E, generator=gen)[: t.shape[-1]] for _ in range(t.shape[0])]
            t.copy_(torch.stack(rows).to(t.dtype))


def recipe_weights(ckpt, base_seed, adjust=None):
    """Replaces the checkpoint save_pretrained wrote in `ckpt` by one drawn from a recipe
    (golden_weights.py; the tensors' names, dtypes and shapes as HF saved them) and returns the
    recipe, which the engine's tests turn back into the same bytes."""
    saved = {}
    for f in sorted(glob.glob(os.path.join(ckpt, "*.safetensors"))):
        saved.update(load_file(f))
        os.remove(f)
    index = os.path.join(ckpt, "model.safetensors.index.json")
    if os.path.exists(index):
        os.remove(index)
    dtypes = {torch.bfloat16: "BF16", torch.float32: "F32"}
    manifest = {"seed": base_seed, "tensors": []}
    state = {}
    for name in sorted(saved):
        t = saved[name]
        if t.dtype in (torch.int64, torch.int32):  # index tables (hash routing): kept as they are
            entry = {"name": name, "dtype": "I64" if t.dtype == torch.int64 else "I32", "shape": list(t.shape),
                     "values": t.reshape(-1).tolist()}
            manifest["tensors"].append(entry)
            state[name] = t.contiguous()
            continue
        if t.dtype not in dtypes:
            raise ValueError(f"{name}: dtype {t.dtype} has no recipe")
        offset, scale = golden_weights.recipe(name, t.float().numpy())
        if adjust:
            offset, scale = adjust(name, list(t.shape), offset, scale)
        entry = {"name": name, "dtype": dtypes[t.dtype], "shape": list(t.shape), "offset": offset, "scale": scale}
        manifest["tensors"].append(entry)
        state[name] = torch.from_numpy(golden_weights.values(entry, base_seed)).to(t.dtype).contiguous()
    save_file(state, os.path.join(ckpt, "model.safetensors"), metadata={"format": "pt"})
    return manifest


def gemma4_recipe(name, shape, offset, scale):
    """Gemma 4 scales its embeddings up by sqrt(hidden_size): drawn that much smaller. Its scores are
    not scaled by 1/sqrt(head_dim): q/k norms of D^-1/4 keep q.k near unit size, as trained weights
    do (with ones, a bf16 KV's rounding is magnified D-fold in the scores). Its router reads its
    input times hidden^-1/2: the projection drawn that much larger, so routing is not a near tie."""
    if name.endswith("embed_tokens.weight"):
        return 0.0, shape[-1] ** -0.5
    if name.endswith("q_norm.weight") or name.endswith("k_norm.weight"):
        o = shape[0] ** -0.25
        return o, 0.1 * o
    if name.endswith("router.proj.weight"):
        return 0.0, 1.0
    return offset, scale


# Families whose recipes deviate from golden_weights.recipe: (name, shape, offset, scale) -> (offset, scale).
RECIPE_ADJUST = {"gemma4_text": gemma4_recipe}


def make(name, out_root, recipe=False):
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    cfg, cls = {**ARCHS, **AHEAD}[name]()
    model = (cls.from_config(cfg) if cls is transformers.AutoModelForCausalLM else cls(cfg)).eval()
    cls = type(model)
    if not recipe:
        scale_init(model, gen)
    hash_tables(model, gen)  # kept as values in a recipe too
    out = os.path.join(out_root, name)
    ckpt = os.path.join(out, "checkpoint")
    shutil.rmtree(out, ignore_errors=True)
    model.to(torch.bfloat16).save_pretrained(ckpt)
    del model
    manifest = recipe_weights(ckpt, zlib.crc32(name.encode()), RECIPE_ADJUST.get(name)) if recipe else None

    # The reference: the saved bf16 weights, computed in float32 on the CPU.
    ref = cls.from_pretrained(ckpt, dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.randint(0, VOCAB - 1, (1, T), generator=gen)
    with torch.no_grad():
        logits = ref(input_ids=ids).logits[0].float().contiguous()
        gen_out = ref.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                               max_new_tokens=NEW_TOKENS, eos_token_id=EOS, pad_token_id=EOS)
    greedy = gen_out[0, T:].contiguous()
    save_file({"input_ids": ids[0].contiguous(), "logits": logits, "greedy_ids": greedy},
              os.path.join(out, "golden.safetensors"))
    tensors = sorted(json.load(open(os.path.join(ckpt, "model.safetensors.index.json")))["weight_map"]) \
        if os.path.exists(os.path.join(ckpt, "model.safetensors.index.json")) else None
    if manifest:  # the fixture keeps the recipe, not the bytes
        del ref
        os.remove(os.path.join(ckpt, "model.safetensors"))
        json.dump(manifest, open(os.path.join(ckpt, "weights.json"), "w"), indent=0)
    print(f"{name}: logits {tuple(logits.shape)} std {logits.std():.3f}, greedy {greedy.tolist()}"
          f"{' (sharded)' if tensors else ''}{' (recipe)' if manifest else ''}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", default=list(ARCHS))
    ap.add_argument("--recipe", action="store_true",
                    help="keep the weights as a recipe (checkpoint/weights.json, golden_weights.py) "
                         "instead of model.safetensors: ~0.4 MB a fixture instead of ~4 MB")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    failed = []
    for name in args.only:
        try:
            make(name, args.out, args.recipe)
        except Exception:  # one family's failure must not cost the others their goldens
            traceback.print_exc()
            failed.append(name)
    if failed:
        raise SystemExit(f"failed: {' '.join(failed)}")


if __name__ == "__main__":
    main()
