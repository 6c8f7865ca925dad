#!/usr/bin/python3
"""Trains the embedded default model, a tiny Qwen2, on the first 90% of tinyshakespeare and
writes the complete model directory (dev-only; python3-torch, python3-numpy, python3-regex).

    /usr/bin/python3 tools/train/train_tokenizer.py        # tokenizer.json first
    /usr/bin/python3 tools/train/train_model.py             # then this (~30 min on 2 cores)

Writes data/default-model/{config.json, generation_config.json, model.safetensors (bf16),
heldout.txt, reference_perplexity.json, train_log.json} and
tests/data/models/default-model-reference.safetensors. tools/train/model_readme.py then
writes README.md (with samples) from those files.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import bpe  # noqa: E402
import qwen2_reference as ref  # noqa: E402
import safetensors_io as st  # noqa: E402
from qwen2_torch import Qwen2  # noqa: E402
from train_tokenizer import ROOT, split_text  # noqa: E402


def make_config(a, vocab):
    return dict(sorted({
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": vocab - 3, "eos_token_id": vocab - 1,  # <|endoftext|>, <|im_end|>
        "hidden_act": "silu", "hidden_size": a.hidden, "initializer_range": 0.02,
        "intermediate_size": a.inter, "max_position_embeddings": a.ctx,
        "max_window_layers": a.layers, "model_type": "qwen2",
        "num_attention_heads": a.heads, "num_hidden_layers": a.layers,
        "num_key_value_heads": a.kv_heads, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "sliding_window": a.ctx, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False,
        "vocab_size": vocab}.items()))


def init_weights(net, seed):
    g = torch.Generator().manual_seed(seed)
    n_layers = net.c["num_hidden_layers"]
    for name, p in sorted(net.named_parameters()):
        with torch.no_grad():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                std = 0.02
                if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                    std = 0.02 / math.sqrt(2 * n_layers)  # residual branches start small
                p.copy_(torch.randn(p.shape, generator=g) * std)


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def eval_loss(net, data, ctx, n_windows):
    """Mean next-token loss over the first n_windows non-overlapping windows of ctx tokens."""
    net.eval()
    total, count = 0.0, 0
    for w in range(min(n_windows, (len(data) - 1) // ctx)):
        x = torch.tensor(data[w * ctx:(w + 1) * ctx + 1])[None]
        logits = net(x[:, :-1])
        total += torch.nn.functional.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
        count += ctx
    net.train()
    return total / count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "default-model"))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--inter", type=int, default=512)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=0,
                    help="optimizer steps; 0: as many as fit in --minutes, measured on steps "
                         "5-14 (inside the warmup, which does not depend on the total)")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--evals", type=int, default=12, help="held-out evaluations during training")
    ap.add_argument("--reference-out", default=os.path.join(
        ROOT, "tests", "data", "models", "default-model-reference.safetensors"))
    ap.add_argument("--bench", action="store_true", help="time 5 steps and exit")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    tok = bpe.load_tokenizer_json(os.path.join(a.out, "tokenizer.json"))
    vocab = len(tok.strings) + len(bpe.SPECIALS)
    train_text, heldout = split_text(a.data)
    with open(a.data, "rb") as f:
        data_sha = hashlib.sha256(f.read()).hexdigest()
    train_ids = tok.encode(train_text)
    held_ids = tok.encode(heldout)
    print(f"vocab {vocab}; train {len(train_text)} chars -> {len(train_ids)} tokens; "
          f"held-out {len(heldout)} chars -> {len(held_ids)} tokens")

    config = make_config(a, vocab)
    net = Qwen2(config)
    init_weights(net, a.seed)
    n_params = sum(p.numel() for p in net.parameters())
    print(f"parameters: {n_params}")
    decay = [p for n, p in net.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in net.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    data = torch.tensor(train_ids, dtype=torch.long)
    g = torch.Generator().manual_seed(a.seed + 1)
    log, losses = [], []  # losses: training batches since the last evaluation
    t0 = time.time()
    steps = 5 if a.bench else (a.steps or 10 ** 9)
    step = 0
    while step < steps:
        if step == 5:
            t_measure = time.time()
        if step == 15 and not a.steps:
            per_step = (time.time() - t_measure) / 10
            a.steps = steps = max(a.warmup + 10, int(a.minutes * 60 / (per_step * 1.06)))
            print(f"{per_step:.2f} s/step -> {steps} steps (rerun with --steps {steps})")
        eval_every = max(1, a.steps // a.evals) if a.steps else 10 ** 9
        for group in opt.param_groups:
            group["lr"] = lr_at(step, a)
        starts = torch.randint(0, len(data) - a.ctx - 1, (a.batch,), generator=g)
        x = torch.stack([data[s:s + a.ctx + 1] for s in starts.tolist()])
        logits = net(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        step += 1
        losses.append(loss.item())
        if a.bench:
            print(f"step {step}: loss {loss.item():.3f}, {time.time() - t0:.1f} s")
            continue
        if step % eval_every == 0 or step == 1 or step == steps:
            val = eval_loss(net, held_ids, a.ctx, 20)
            entry = {"step": step, "tokens_seen": step * a.batch * a.ctx,
                     "train_loss": round(float(np.mean(losses)), 4), "val_loss": round(val, 4),
                     "minutes": round((time.time() - t0) / 60, 2)}
            log.append(entry)
            losses = []
            print(json.dumps(entry), flush=True)
    if a.bench:
        dt = (time.time() - t0) / 5
        print(f"{dt:.2f} s/step, {a.batch * a.ctx / dt:.0f} tokens/s")
        return
    train_seconds = time.time() - t0

    # Write the model directory.
    os.makedirs(a.out, exist_ok=True)
    state = {k: v.detach().float().numpy() for k, v in net.state_dict().items()}
    st.save(os.path.join(a.out, "model.safetensors"), {k: ("BF16", v) for k, v in state.items()},
            {"format": "pt"})
    ref.write_json(os.path.join(a.out, "config.json"), config)
    ref.write_json(os.path.join(a.out, "generation_config.json"), {
        "bos_token_id": vocab - 3, "pad_token_id": vocab - 3, "do_sample": True,
        "eos_token_id": [vocab - 3, vocab - 1], "repetition_penalty": 1.1,
        "temperature": 0.8, "top_k": 40, "top_p": 0.95, "transformers_version": "4.43.1"})
    with open(os.path.join(a.out, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(heldout)

    # The reference, on exactly the stored bf16 weights, in float64.
    cfg, W = ref.load_model(a.out)
    check = Qwen2(config).double()
    check.load_state_dict({k: torch.from_numpy(v) for k, v in W.items()})
    window = held_ids[:a.ctx]
    with torch.no_grad():
        diff = np.abs(check(torch.tensor(window)[None])[0].numpy() - ref.forward(cfg, W, window)[0]).max()
    print(f"torch float64 vs reference on the bf16 weights: max |logit diff| {diff:.2e}")
    assert diff < 1e-9
    t1 = time.time()
    ppl = ref.perplexity(cfg, W, held_ids, a.ctx)
    ppl["file"] = "heldout.txt"
    ppl["tokens_sha256"] = hashlib.sha256(np.asarray(held_ids, "<i4").tobytes()).hexdigest()
    ppl["protocol"] = ("tokenize heldout.txt (no specials); consecutive non-overlapping windows of "
                       "ctx tokens, the last one shorter; each window from an empty cache; the "
                       "first token of a window is not scored; NLL from log-softmax summed in "
                       "float64; ppl = exp(nll_sum / scored)")
    ref.write_json(os.path.join(a.out, "reference_perplexity.json"), ppl)
    print(f"reference held-out perplexity {ppl['perplexity']:.4f} +- {ppl['perplexity_stderr']:.4f} "
          f"over {ppl['scored']} tokens ({time.time() - t1:.0f} s)")
    ref.export_reference(a.out, a.reference_out)
    summary = {"command": " ".join(["tools/train/train_model.py"] + sys.argv[1:]),
               "data_sha256": data_sha, "train_tokens": len(train_ids),
               "heldout_tokens": len(held_ids), "parameters": n_params,
               "train_minutes": round(train_seconds / 60, 1), "threads": a.threads,
               "args": vars(a), "log": log, "heldout_perplexity": ppl["perplexity"]}
    ref.write_json(os.path.join(a.out, "train_log.json"), summary)


if __name__ == "__main__":
    main()
