"""Simulated quantization for the float64 reference (dev-only; numpy).

What the engine's int8/int4 forward computes, written from the formats' definitions
(kernels/quant_blocks.h, kernels/scalar_quant.cpp), not from its code:

* Weights, round to nearest, per block of 32 consecutive weights of a row, in float32
  arithmetic as the engine's reference quantizer does it:
    Q8_0: d = max|w| / 127, q = round(w / d) (via w * (1/d), half away from zero),
          value = f16(d) * q
    Q4_0: m = the weight of largest magnitude (the first one on ties), d = m / -8,
          q = clamp(round(w * (1/d)), -8, 7), value = f16(d) * q
  f16(d) rounds to nearest even. Every value f16(d) * q is exact in float32 and float64.
* The quantization scheme: every layer matrix in the requested type, the matrix computing the
  logits (tied embedding or lm_head) in Q8_0 under both types, an untied embedding in the
  requested type. Norms and biases unchanged.
* Activations: every product with a quantized matrix first rounds its input rows to int8
  blocks of 32: dx = max|x| / 127, x -> dx * round(x / dx). (The engine then sums exact
  integer products per block; in float64 that is the plain product of the rounded values.)

Everything else is the float64 forward of qwen2_reference.py.
"""

import numpy as np

BLOCK = 32


def _round_half_away(v):
    """lround: v is float32; computed in float64 where |v| + 0.5 is exact."""
    v = np.asarray(v, dtype=np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _f16(d):
    return np.asarray(d, dtype=np.float32).astype(np.float16).astype(np.float32)


def quantized_blocks(w, kind):
    """w: [rows, cols] float array (values exactly representable in float32) ->
    (d: float32 [rows, cols/32, 1] before rounding to f16, q: int [rows, cols/32, 32])."""
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    assert cols % BLOCK == 0, (kind, w.shape)
    b = w.reshape(rows, cols // BLOCK, BLOCK)
    with np.errstate(divide="ignore"):
        if kind == "Q8_0":
            d = (np.abs(b).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
            inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
            q = _round_half_away((b * inv).astype(np.float32))
        elif kind == "Q4_0":
            first_max = np.abs(b).argmax(axis=-1)[..., None]  # argmax: the first maximum
            m = np.take_along_axis(b, first_max, axis=-1)
            d = (m / np.float32(-8)).astype(np.float32)
            inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
            q = np.clip(_round_half_away((b * inv).astype(np.float32)), -8, 7)
        else:
            raise ValueError(kind)
    return d, q.astype(np.int64)


def dequantized(w, kind):
    """The values the engine holds after quantizing w to `kind` ("Q8_0" or "Q4_0"), float64."""
    d, q = quantized_blocks(w, kind)
    return (_f16(d).astype(np.float64) * q).reshape(np.shape(w))


def block_bytes(w, kind):
    """The file bytes of w quantized to `kind`: per block the f16 scale (little endian), then
    Q8_0: 32 int8; Q4_0: 16 bytes, byte j = (q[j] + 8) | (q[j + 16] + 8) << 4."""
    d, q = quantized_blocks(w, kind)
    rows, nb = d.shape[0], d.shape[1]
    scale = d.astype(np.float16).view(np.uint8).reshape(rows, nb, 2)
    if kind == "Q8_0":
        body = q.astype(np.int8).view(np.uint8)
    else:
        u = (q + 8).astype(np.uint8)
        body = u[..., :16] | (u[..., 16:] << 4)
    return np.concatenate([scale, body], axis=-1).tobytes()


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def quantize_activations(x):
    """Rows of x [T, n] rounded to int8 blocks of 32 with scale max|x| / 127."""
    T, n = x.shape
    b = x.reshape(T, n // BLOCK, BLOCK)
    dx = np.abs(b).max(axis=-1, keepdims=True) / 127.0
    safe = np.where(dx != 0, dx, 1.0)
    q = np.where(dx != 0, _round_half_away(b / safe), 0.0)
    return (q * dx).reshape(T, n)


def rounding_margin(x):
    """How close the activation rounding came to flipping: the smallest |x/dx - (k + 1/2)|
    over all elements, in units of one step (0.5 = as far as possible)."""
    T, n = x.shape
    b = x.reshape(T, n // BLOCK, BLOCK)
    dx = np.abs(b).max(axis=-1, keepdims=True) / 127.0
    v = np.abs(b / np.where(dx != 0, dx, 1.0))
    return float(np.abs(v - np.floor(v) - 0.5).min())


def scheme(names, kind, tied):
    """The type of each matrix under the engine's scheme for `kind`."""
    out = {}
    for name in names:
        if name.endswith("norm.weight") or name.endswith(".bias"):
            continue
        head = name == "lm_head.weight" or (tied and name == "model.embed_tokens.weight")
        out[name] = "Q8_0" if head else kind
    return out


def quantized_weights(cfg, W, kind):
    """(weights with every matrix dequantized per the scheme, the set of matrix names whose
    products quantize their activations)."""
    types = scheme(W.keys(), kind, cfg.tied)
    Q = dict(W)
    for name, t in types.items():
        Q[name] = dequantized(W[name], t)
    return Q, set(types)
