#!/usr/bin/python3
"""Independent float64 reference of the Qwen2, Qwen3 and Llama 3 forward passes (dev-only; numpy).

Written from the math, not from any library's code:
  x = embed[tokens]
  per layer:  h = rmsnorm(x, w_in)
              q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv   (biases: qwen2 only)
              q, k = rmsnorm(q_head, w_qn), rmsnorm(k_head, w_kn) per head of head_dim (qwen3 only)
              rope(q), rope(k)  (half-split pairs i, i + d/2; angle p * theta^(-2i/d); llama3
                                 rope_scaling changes the low frequencies, see rope_inv_freq)
              grouped-query attention: KV head h serves query heads h*g .. h*g+g-1,
              causal (j <= i), softmax(q.k / sqrt(d))
              x = x + o_proj(attn)
              x = x + down(silu(gate(rmsnorm(x, w_post))) * up(rmsnorm(x, w_post)))
  logits = rmsnorm(x, w_final) E^T   (E = embed when tied, else lm_head)
with rmsnorm(x, w) = x / sqrt(mean(x^2) + eps) * w.

Subcommands (see tools/reference/README.md):
  tiny        write the tiny random models + their reference files under tests/data/models/
  export      reference logits for an existing model dir (used for the default model)
  perplexity  held-out perplexity with the protocol of `nanoinfer perplexity`
"""

import argparse
import hashlib
import json
import os
import sys

# One BLAS thread: float64 results must not depend on how many cores the machine has.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_reference as qr  # noqa: E402
import safetensors_io as st  # noqa: E402


# ----------------------------------------------------------------------------- model

class Config:
    def __init__(self, d):
        self.arch = d["model_type"]
        assert self.arch in ("qwen2", "qwen3", "llama"), self.arch
        self.bias = self.arch == "qwen2"
        self.qk_norm = self.arch == "qwen3"
        self.scaling = d.get("rope_scaling")
        assert self.scaling is None or self.scaling["rope_type"] == "llama3"
        self.hidden = d["hidden_size"]
        self.inter = d["intermediate_size"]
        self.n_layers = d["num_hidden_layers"]
        self.n_heads = d["num_attention_heads"]
        self.n_kv = d["num_key_value_heads"]
        self.vocab = d["vocab_size"]
        self.theta = float(d["rope_theta"])
        self.eps = float(d["rms_norm_eps"])
        self.tied = bool(d["tie_word_embeddings"])
        assert self.n_heads % self.n_kv == 0
        self.head_dim = d.get("head_dim") or self.hidden // self.n_heads
        assert self.arch != "qwen2" or self.head_dim * self.n_heads == self.hidden
        self.q_dim = self.n_heads * self.head_dim
        self.group = self.n_heads // self.n_kv


def tensor_names(cfg):
    """The HF tensor manifest (Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM): name -> shape."""
    H, I, V, d, Q = cfg.hidden, cfg.inter, cfg.vocab, cfg.head_dim, cfg.q_dim
    kv = cfg.n_kv * d
    shapes = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H]}
    for L in range(cfg.n_layers):
        p = f"model.layers.{L}."
        # The insertion order is the order random_weights draws in: kept as it was for qwen2.
        shapes[p + "input_layernorm.weight"] = [H]
        for name, rows, cols in (("q", Q, H), ("k", kv, H), ("v", kv, H)):
            shapes[p + f"self_attn.{name}_proj.weight"] = [rows, cols]
            if cfg.bias:
                shapes[p + f"self_attn.{name}_proj.bias"] = [rows]
            if cfg.qk_norm and name != "v":
                shapes[p + f"self_attn.{name}_norm.weight"] = [d]
        shapes.update({
            p + "self_attn.o_proj.weight": [H, Q],
            p + "post_attention_layernorm.weight": [H],
            p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
            p + "mlp.down_proj.weight": [H, I],
        })
    if not cfg.tied:
        shapes["lm_head.weight"] = [V, H]
    return shapes


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = Config(json.load(f))
    raw, _ = st.load(os.path.join(model_dir, "model.safetensors"))
    expected = tensor_names(cfg)
    assert set(raw) == set(expected), sorted(set(raw) ^ set(expected))
    weights = {}
    for name, shape in expected.items():
        assert list(raw[name].shape) == shape, (name, raw[name].shape, shape)
        weights[name] = raw[name].astype(np.float64)
    return cfg, weights


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def linear(x, w, b=None):
    y = x @ w.T  # w: [out, in]
    return y if b is None else y + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def rope_inv_freq(d, theta, scaling):
    """theta^(-2i/d), i < d/2. With Llama 3's rope_scaling (factor, low_freq_factor,
    high_freq_factor, original_max_position_embeddings = L), by wavelength w = 2 pi / f:
    w > L / low_freq_factor: f / factor; w < L / high_freq_factor: f; otherwise the blend
    (1 - s) f / factor + s f with s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor)."""
    f = theta ** (-2.0 * np.arange(d // 2, dtype=np.float64) / d)
    if scaling is None:
        return f
    L, lo, hi, factor = (float(scaling["original_max_position_embeddings"]), scaling["low_freq_factor"],
                         scaling["high_freq_factor"], scaling["factor"])
    w = 2 * np.pi / f
    s = (L / w - lo) / (hi - lo)
    blended = (1 - s) * f / factor + s * f
    return np.where(w > L / lo, f / factor, np.where(w < L / hi, f, blended))


def rope(x, positions, theta, scaling=None):
    """x: [T, n_heads, d]; rotates pairs (i, i + d/2) by angle p * inv_freq[i]."""
    d = x.shape[-1]
    inv_freq = rope_inv_freq(d, theta, scaling)  # [d/2]
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # [T, d/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def log_softmax(z):
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


class KVCache:
    def __init__(self, cfg):
        self.k = [np.zeros((0, cfg.n_kv, cfg.head_dim)) for _ in range(cfg.n_layers)]
        self.v = [np.zeros((0, cfg.n_kv, cfg.head_dim)) for _ in range(cfg.n_layers)]

    def __len__(self):
        return self.k[0].shape[0]


def forward(cfg, W, tokens, cache=None, act_quant=False, margins=None):
    """Runs `tokens` (positions continue from the cache length) and returns
    (logits [T, V], hidden after each layer [n_layers][T, H], final norm [T, H]).
    act_quant: every matrix product first rounds its input to int8 blocks (the engine's
    int8/int4 kernels; quant_reference.py); `margins` (a list) then collects, per product, how
    close that rounding came to a tie."""
    def linear_q(x, w, b=None):
        if act_quant:
            if margins is not None:
                margins.append(qr.rounding_margin(x))
            x = qr.quantize_activations(x)
        return linear(x, w, b)
    tokens = np.asarray(tokens, dtype=np.int64)
    T, d, g = len(tokens), cfg.head_dim, cfg.group
    cache = cache if cache is not None else KVCache(cfg)
    start = len(cache)
    positions = np.arange(start, start + T)
    x = W["model.embed_tokens.weight"][tokens]  # [T, H]
    hiddens = []
    for L in range(cfg.n_layers):
        p = f"model.layers.{L}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], cfg.eps)
        q = linear_q(h, W[p + "self_attn.q_proj.weight"], W.get(p + "self_attn.q_proj.bias"))
        k = linear_q(h, W[p + "self_attn.k_proj.weight"], W.get(p + "self_attn.k_proj.bias"))
        v = linear_q(h, W[p + "self_attn.v_proj.weight"], W.get(p + "self_attn.v_proj.bias"))
        q, k = q.reshape(T, cfg.n_heads, d), k.reshape(T, cfg.n_kv, d)
        if cfg.qk_norm:  # each head's d values normalized on their own
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], cfg.eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], cfg.eps)
        q = rope(q, positions, cfg.theta, cfg.scaling)
        k = rope(k, positions, cfg.theta, cfg.scaling)
        cache.k[L] = np.concatenate([cache.k[L], k])  # [start + T, n_kv, d]
        cache.v[L] = np.concatenate([cache.v[L], v.reshape(T, cfg.n_kv, d)])
        S = start + T
        causal = np.arange(S)[None, :] <= positions[:, None]  # [T, S]: key j visible to query i
        out = np.empty((T, cfg.n_heads, d))
        for qh in range(cfg.n_heads):
            kh = qh // g  # KV head h serves query heads h*g .. h*g+g-1
            scores = q[:, qh, :] @ cache.k[L][:, kh, :].T / np.sqrt(d)  # [T, S]
            scores = np.where(causal, scores, -np.inf)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            out[:, qh, :] = probs @ cache.v[L][:, kh, :]
        x = x + linear_q(out.reshape(T, cfg.q_dim), W[p + "self_attn.o_proj.weight"])
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], cfg.eps)
        gate = linear_q(h, W[p + "mlp.gate_proj.weight"])
        up = linear_q(h, W[p + "mlp.up_proj.weight"])
        x = x + linear_q(silu(gate) * up, W[p + "mlp.down_proj.weight"])
        hiddens.append(x)
    final = rms_norm(x, W["model.norm.weight"], cfg.eps)
    head = W["model.embed_tokens.weight"] if cfg.tied else W["lm_head.weight"]
    return linear_q(final, head), hiddens, final


def greedy(cfg, W, prompt, n, act_quant=False):
    """n greedy tokens, recomputing the whole sequence each step (no cache involved).
    Ties go to the lowest token id (np.argmax returns the first maximum).
    Returns (tokens, margins): margin = top-1 minus top-2 logit at each step, so a test
    can tell a real disagreement from a near-tie."""
    seq, margins = list(prompt), []
    for _ in range(n):
        last = forward(cfg, W, seq, act_quant=act_quant)[0][-1]
        top2 = np.sort(last)[-2:]
        margins.append(top2[1] - top2[0])
        seq.append(int(np.argmax(last)))
    return seq[len(prompt):], margins


def check_incremental(cfg, W, prompt):
    """Self-check: one token at a time through the cache, and a ragged split, must
    reproduce the full-sequence logits."""
    full, _, _ = forward(cfg, W, prompt)
    for split in ([1] * len(prompt), [len(prompt) // 3, len(prompt) - len(prompt) // 3]):
        cache, parts, at = KVCache(cfg), [], 0
        for n in split:
            if n:
                parts.append(forward(cfg, W, prompt[at:at + n], cache)[0])
                at += n
        err = np.abs(np.concatenate(parts) - full).max()
        assert err < 1e-10, f"incremental vs full differ by {err}"


def perplexity(cfg, W, tokens, ctx):
    """Protocol of `nanoinfer perplexity`: the tokens are cut into consecutive,
    non-overlapping windows of ctx tokens (the last window may be shorter; a window of one
    token scores nothing); each window starts with an empty cache; the first token of each
    window is not scored; token t+1 is scored by log_softmax(logits[t]); NLL sums in float64.
    ppl = exp(total NLL / tokens scored)."""
    windows = []
    for begin in range(0, len(tokens), ctx):
        win = tokens[begin:begin + ctx]
        if len(win) < 2:
            continue
        logits, _, _ = forward(cfg, W, win)
        lp = log_softmax(logits[:-1])
        nll = -lp[np.arange(len(win) - 1), np.asarray(win[1:])]
        windows.append({"begin": begin, "tokens": len(win), "scored": len(win) - 1,
                        "nll_sum": float(nll.sum()), "nll": nll})
    all_nll = np.concatenate([w.pop("nll") for w in windows])
    mean = float(all_nll.mean())
    # Standard error of the mean NLL, carried to the perplexity by the delta method.
    sem = float(all_nll.std(ddof=1) / np.sqrt(len(all_nll))) if len(all_nll) > 1 else 0.0
    return {"ctx": ctx, "tokens": len(tokens), "scored": int(len(all_nll)),
            "nll_sum": float(all_nll.sum()), "mean_nll": mean, "perplexity": float(np.exp(mean)),
            "perplexity_stderr": float(np.exp(mean) * sem), "windows": windows}


# ----------------------------------------------------------------------------- tiny models

# name -> (seed, config overrides, stored dtype)
TINY = {
    "tiny-gqa7": (7, dict(hidden_size=448, num_attention_heads=7, num_key_value_heads=1,
                          num_hidden_layers=2, intermediate_size=128, vocab_size=256,
                          tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6),
                  "F32"),
    "tiny-untied": (11, dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                             num_hidden_layers=3, intermediate_size=256, vocab_size=300,
                             tie_word_embeddings=False, rope_theta=10000.0, rms_norm_eps=1e-5),
                    "F32"),
    "tiny-bf16": (13, dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                           num_hidden_layers=2, intermediate_size=192, vocab_size=256,
                           tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6),
                  "BF16"),
    # Qwen3: head_dim 32 is not hidden / heads (16), untied head, per-head q/k norms.
    "tiny-qwen3": (17, dict(model_type="qwen3", hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=32, num_hidden_layers=2, intermediate_size=128, vocab_size=256,
                            tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-6),
                   "F32"),
    # Llama 3.2: GQA 4:1, tied, Llama 3.2's rope scaling (factor 32) and theta.
    "tiny-llama": (19, dict(model_type="llama", hidden_size=128, num_attention_heads=4, num_key_value_heads=1,
                            num_hidden_layers=2, intermediate_size=192, vocab_size=300,
                            tie_word_embeddings=True, rope_theta=500000.0, rms_norm_eps=1e-5,
                            rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                          "original_max_position_embeddings": 8192, "rope_type": "llama3"}),
                   "F32"),
}

MAX_POS = 256
MIN_MARGIN = 1e-3  # longest reference sequence is 64 + 8 greedy tokens


def qwen2_config(overrides, dtype):
    """config.json with every field the architecture's real configs have."""
    V = overrides["vocab_size"]
    arch = overrides.get("model_type", "qwen2")
    cfg = {
        "architectures": [{"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                           "llama": "LlamaForCausalLM"}[arch]],
        "attention_dropout": 0.0,
        "bos_token_id": V - 2,
        "eos_token_id": V - 1,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "max_position_embeddings": MAX_POS,
        "model_type": arch,
        "torch_dtype": {"F32": "float32", "BF16": "bfloat16"}[dtype],
        "transformers_version": "4.43.1",
        "use_cache": True,
    }
    if arch in ("qwen2", "qwen3"):
        cfg.update({"max_window_layers": overrides["num_hidden_layers"], "use_sliding_window": False,
                    "sliding_window": MAX_POS if arch == "qwen2" else None})
    if arch in ("qwen3", "llama"):
        cfg.update({"attention_bias": False, "head_dim": overrides.get("head_dim", overrides["hidden_size"] //
                                                                       overrides["num_attention_heads"])})
    if arch == "qwen3":
        cfg.update({"rope_scaling": None, "transformers_version": "4.51.0"})
    if arch == "llama":
        cfg.update({"mlp_bias": False, "pretraining_tp": 1, "transformers_version": "4.45.0"})
    cfg.update(overrides)
    return dict(sorted(cfg.items()))


def random_weights(cfg, seed):
    """Scales chosen so activations and logits are of order 1: matrices ~ N(0, 1/fan_in),
    norm weights 1 +- 0.1, biases ~ N(0, 0.1^2); tied embedding ~ N(0, 1/H) so the
    logits are ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    W = {}
    for name, shape in tensor_names(cfg).items():
        if name.endswith("norm.weight"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            a = 0.1 * rng.standard_normal(shape)
        else:
            a = rng.standard_normal(shape) / np.sqrt(shape[1])
        W[name] = a.astype(np.float32)
    return W


def tiny_prompts(vocab, seed):
    rng = np.random.default_rng(seed)
    pattern = rng.integers(0, vocab, 8)
    return [rng.integers(0, vocab, 1), rng.integers(0, vocab, 5), rng.integers(0, vocab, 17),
            np.tile(pattern, 4),                       # 32 tokens: an 8-token pattern, repeated
            rng.integers(0, vocab, 64),
            np.full(9, rng.integers(0, vocab))]        # one token, nine times


QUANT_KINDS = {"int8": "Q8_0", "int4": "Q4_0"}


def reference_tensors(cfg, W, prompts, bf16w=None, last=None, n_greedy=8, hidden=True):
    """The tensors of a reference file. `last`: keep only that many final positions of
    the logits (named logits_last{last}.K)."""
    out = {}
    # The engine's int8 and int4 models (quant_reference.py): weights quantized by the scheme,
    # activations rounded to int8 blocks before every product.
    quantized = {name: qr.quantized_weights(cfg, W, kind)[0] for name, kind in QUANT_KINDS.items()}
    for K, prompt in enumerate(prompts):
        prompt = [int(t) for t in prompt]
        check_incremental(cfg, W, prompt)
        logits, hiddens, final = forward(cfg, W, prompt)
        out[f"prompt.{K}"] = ("I32", np.asarray(prompt, dtype=np.int32))
        if last is None:
            out[f"logits.{K}"] = ("F32", logits)
        else:
            out[f"logits_last{last}.{K}"] = ("F32", logits[-last:])
        if hidden:
            for L, h in enumerate(hiddens):
                out[f"hidden.{K}.layer.{L}"] = ("F32", h)
            out[f"final_norm.{K}"] = ("F32", final)
        if bf16w is not None:
            out[f"logits_bf16w.{K}"] = ("F32", forward(cfg, bf16w, prompt)[0])
        if n_greedy:
            tokens, margins = greedy(cfg, W, prompt, n_greedy)
            out[f"greedy.{K}"] = ("I32", np.asarray(tokens, np.int32))
            out[f"greedy_margin.{K}"] = ("F32", np.asarray(margins))
        for name, Wq in quantized.items():
            rounding = []
            logits_q = forward(cfg, Wq, prompt, act_quant=True, margins=rounding)[0]
            out[f"logits_{name}.{K}" if last is None else f"logits_last{last}_{name}.{K}"] = (
                "F32", logits_q if last is None else logits_q[-last:])
            out[f"rounding_margin_{name}.{K}"] = ("F32", np.asarray([min(rounding)]))
            if n_greedy:
                tokens, margins = greedy(cfg, Wq, prompt, n_greedy, act_quant=True)
                out[f"greedy_{name}.{K}"] = ("I32", np.asarray(tokens, np.int32))
                out[f"greedy_margin_{name}.{K}"] = ("F32", np.asarray(margins))
    return out


def tensors_without_near_ties(cfg, W, seed, **kw):
    """Prompt sets are drawn (seeds seed, seed+1, ...) until no greedy step is a near-tie
    (top-1 minus top-2 logit >= MIN_MARGIN), so an engine within tolerance must pick the
    same tokens. Returns (tensors, the seed used)."""
    for attempt in range(100):
        tensors = reference_tensors(cfg, W, tiny_prompts(cfg.vocab, seed + attempt), **kw)
        if min(a.min() for k, (_, a) in tensors.items() if k.startswith("greedy_margin.")) >= MIN_MARGIN:
            return tensors, seed + attempt
    raise RuntimeError("no prompt set without near-ties")


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def cmd_tiny(args):
    for name, (seed, overrides, dtype) in TINY.items():
        if args.only and name not in args.only:
            continue
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        config = qwen2_config(overrides, dtype)
        cfg = Config(config)
        stored = random_weights(cfg, seed)
        write_json(os.path.join(d, "config.json"), config)
        write_json(os.path.join(d, "generation_config.json"), {
            "bos_token_id": config["bos_token_id"], "eos_token_id": [config["eos_token_id"]],
            "do_sample": True, "temperature": 0.7, "top_k": 20, "top_p": 0.8,
            "repetition_penalty": 1.1, "transformers_version": "4.43.1"})
        st.save(os.path.join(d, "model.safetensors"),
                {n: (dtype, a) for n, a in stored.items()}, {"format": "pt"})
        # The reference runs on exactly the stored values, read back from the file.
        cfg, W = load_model(d)
        bf16w = None
        if dtype == "F32":
            bf16w = {n: st.round_to_bf16(a) for n, a in W.items()}
        tensors, prompt_seed = tensors_without_near_ties(cfg, W, seed + 1000, bf16w=bf16w)
        metadata = {"generator": "tools/reference/qwen2_reference.py tiny"}
        # The exact file bytes of every quantized matrix (round to nearest, the scheme's
        # types), as FNV-1a 64 hashes: the engine's quantizer must produce them bit for bit.
        for qname, kind in QUANT_KINDS.items():
            types = qr.scheme(W.keys(), kind, cfg.tied)
            metadata[f"blocks_fnv1a64_{qname}"] = json.dumps(
                {n: qr.fnv1a64(qr.block_bytes(W[n], t)) for n, t in sorted(types.items())}, sort_keys=True)
        st.save(os.path.join(d, "reference.safetensors"), tensors, metadata)
        print(f"{name}: prompt seed {prompt_seed}, max |logit| "
              f"{max(np.abs(a).max() for k, (_, a) in tensors.items() if k.startswith('logits.')):.3f}")


def export_reference(model_dir, out, seed=2024, last=4):
    """Reference for a real-size model dir: seeded prompts as for the tiny models, logits of
    the last `last` positions only, greedy tokens; no hidden states."""
    cfg, W = load_model(model_dir)
    tensors, used = tensors_without_near_ties(cfg, W, seed, last=last, hidden=False)
    st.save(out, tensors, {"generator": "tools/reference/qwen2_reference.py export",
                           "logits": f"last {last} positions of each prompt"})
    return used


def cmd_export(args):
    used = export_reference(args.model, args.out, args.seed, args.last)
    print(f"wrote {args.out}: prompt seed {used}")


def cmd_perplexity(args):
    cfg, W = load_model(args.model)
    with open(args.tokens) as f:
        tokens = json.load(f)
    result = perplexity(cfg, W, tokens, args.ctx)
    result["tokens_sha256"] = hashlib.sha256(
        np.asarray(tokens, dtype="<i4").tobytes()).hexdigest()
    if args.out:
        write_json(args.out, result)
    print(f"ppl {result['perplexity']:.6f} over {result['scored']} scored tokens")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("tiny", help="write tiny random models and their reference files")
    a.add_argument("--out", default="tests/data/models")
    a.add_argument("--only", nargs="*", help="these models only (default: all)")
    a.set_defaults(fn=cmd_tiny)
    a = sub.add_parser("export", help="reference logits of an existing model dir")
    a.add_argument("--model", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--seed", type=int, default=2024)
    a.add_argument("--last", type=int, default=4, help="positions of logits kept per prompt")
    a.set_defaults(fn=cmd_export)
    a = sub.add_parser("perplexity", help="perplexity of token ids (JSON list) under a model")
    a.add_argument("--model", required=True)
    a.add_argument("--tokens", required=True)
    a.add_argument("--ctx", type=int, default=256)
    a.add_argument("--out")
    a.set_defaults(fn=cmd_perplexity)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
