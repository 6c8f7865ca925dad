"""Qwen2 architecture in torch, for training the embedded default model (dev-only).

Parameter names and shapes are exactly Hugging Face Qwen2's, so state_dict() is the
model.safetensors tensor set. Written independently of tools/reference/qwen2_reference.py
(batched, rotate-half RoPE, repeat_interleave for GQA) so agreement between the two is a
real cross-check (see check_against_reference in train_model.py).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.n_kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.d = c["hidden_size"] // self.n_heads
        H = c["hidden_size"]
        self.q_proj = nn.Linear(H, self.n_heads * self.d, bias=True)
        self.k_proj = nn.Linear(H, self.n_kv * self.d, bias=True)
        self.v_proj = nn.Linear(H, self.n_kv * self.d, bias=True)
        self.o_proj = nn.Linear(self.n_heads * self.d, H, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d).transpose(1, 2)  # [B, nh, T, d]
        k = self.k_proj(x).view(B, T, self.n_kv, self.d).transpose(1, 2)     # [B, nkv, T, d]
        v = self.v_proj(x).view(B, T, self.n_kv, self.d).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        g = self.n_heads // self.n_kv
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)  # head h -> h*g..
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.d) + mask  # [B, nh, T, T]
        y = att.softmax(-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, I = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Inner(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Qwen2(nn.Module):
    """Tied embeddings only (what the default model uses)."""

    def __init__(self, c):
        super().__init__()
        assert c["tie_word_embeddings"]
        self.c = c
        self.model = Inner(c)
        self.d = c["hidden_size"] // c["num_attention_heads"]

    def forward(self, idx):  # idx [B, T] -> logits [B, T, V]
        T = idx.shape[1]
        dt = self.model.embed_tokens.weight.dtype
        inv = 1.0 / (self.c["rope_theta"] ** (torch.arange(0, self.d, 2, dtype=torch.float64) / self.d))
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        ang = torch.cat([ang, ang], dim=-1)  # [T, d]
        cos, sin = ang.cos().to(dt), ang.sin().to(dt)
        mask = torch.full((T, T), float("-inf"), dtype=dt).triu(1)
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x) @ self.model.embed_tokens.weight.T
