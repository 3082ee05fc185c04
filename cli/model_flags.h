// Shared by the commands that run a model (logits, generate): the --model/--device/--tokens flags
// and turning them into a loaded model and a token list, with one-line errors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flags.h"
#include "ft/common/result.h"
#include "ft/engine/model.h"

namespace ft::cli {

// "1,2,3" -> {1, 2, 3}. kInvalidArgument naming the bad entry for empty lists, non-integers,
// negative ids or ids beyond int32.
Result<std::vector<int32_t>> parse_token_list(const std::string& text);

// Opens --model DIR with the runtime flags below. `checkpoint` (optional) receives the checkpoint
// the model reads, for callers that look at its tensors too (opening it again would repack a
// quantized checkpoint's weights a second time). `context_tokens` > 0: the positions the caller's
// sequences will hold together, which the KV pool's default size then fits (the rest of a GPU
// budget goes to expert slots) unless --kv-budget says otherwise.
Result<std::unique_ptr<engine::Model>> load_model_from_flags(
    const Args& args, std::shared_ptr<const engine::Checkpoint>* checkpoint = nullptr, int64_t context_tokens = 0);
// --device, --threads, --kv-budget, --gpu-mem, --moe-policy, --expert-slots, --reference and
// --deterministic (those present) as load
// options. --device auto (the default) is cuda when a usable GPU exists, else cpu; --device cuda
// without one is kUnavailable saying why.
Result<engine::LoadOptions> load_options_from_flags(const Args& args);

// `own` followed by the flags every command that loads a model takes: --device, --threads,
// --kv-budget, --gpu-mem, --moe-policy, --expert-slots, --recalibrate, --deterministic (and
// --reference where the command can run the fp32 reference).
std::vector<Flag> with_model_runtime_flags(std::vector<Flag> own, bool reference = true);

// The flag definitions, so every model command spells them the same way.
Flag model_flag();
Flag device_flag();
Flag tokens_flag();
Flag threads_flag();
Flag kv_budget_flag();
Flag gpu_mem_flag();
Flag reference_flag();
Flag deterministic_flag();
Flag cpu_activations_flag();
Flag moe_policy_flag();
Flag expert_slots_flag();
Flag recalibrate_flag();

}  // namespace ft::cli
