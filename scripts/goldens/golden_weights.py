"""Golden fixtures' weights as a recipe, not bytes.

A fixture's weights.json lists every tensor of the checkpoint HF saved (name, dtype, shape) with
the offset and scale of its values; the values come from a counter-based generator that the tests
implement bit for bit (tests/support/golden_weights.cpp), so a fixture holds ~5 KB of recipe
instead of ~4 MB of random bf16, and the engine's test rebuilds the exact checkpoint HF computed
the reference logits from.

  value[i] = offset + scale * u(seed(name), i),  u uniform in [-sqrt(3), sqrt(3)) (unit variance),
  rounded to float32, then to the tensor's dtype (bf16: nearest, ties to even, as torch does).

  seed(name) = fnv1a64(name) ^ base_seed
  u(s, i)    = (2 * (splitmix64(s ^ (i * 0xD1B54A32D192ED03)) >> 11) * 2^-53 - 1) * sqrt(3)
"""
import math

import numpy as np

M64 = (1 << 64) - 1
SQRT3 = math.sqrt(3.0)


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def tensor_seed(name, base_seed):
    return fnv1a64(name) ^ (base_seed & M64)


def uniform(seed, n):
    """u(seed, i) for i in [0, n), float64."""
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64)
        x = np.uint64(seed) ^ (i * np.uint64(0xD1B54A32D192ED03))
        x = x + np.uint64(0x9E3779B97F4A7C15)
        z = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    unit = (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
    return (2.0 * unit - 1.0) * SQRT3


def values(entry, base_seed):
    """A manifest entry's values as float32 (the caller casts to the entry's dtype)."""
    n = int(np.prod(entry["shape"], dtype=np.int64)) if entry["shape"] else 1
    v = entry["offset"] + entry["scale"] * uniform(tensor_seed(entry["name"], base_seed), n)
    return v.astype(np.float32).reshape(entry["shape"])


def recipe(name, init):
    """offset and scale for a tensor HF initialised as `init` (a float32 numpy array): matrices
    N(0, 1/fan_in)-like (embeddings unit), biases 0.1, norms and other constants their value
    +- 0.1, other vectors (A_log, ...) their mean +- 0.3."""
    if init.ndim >= 2:
        return 0.0, 1.0 if "embed" in name else 1.0 / math.sqrt(init.shape[-1])
    if "bias" in name:
        return 0.0, 0.1
    flat = init.reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return float(flat[0]), 0.1
    return float(flat.mean()), 0.3
