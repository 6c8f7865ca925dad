#!/usr/bin/python3
"""Writes data/default-model/README.md from the files the training run left there
(train_log.json, reference_perplexity.json, config.json), so the numbers in the README are
the measured ones, and generates its samples with the float64 reference forward and the
sampler semantics of tools/reference/sampler_reference.py.

    /usr/bin/python3 tools/train/model_readme.py [--model data/default-model]
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import bpe  # noqa: E402
import qwen2_reference as ref  # noqa: E402
from sampler_reference import apply  # noqa: E402

ROOT = os.path.join(HERE, "..", "..")


def generate(cfg, W, tok, prompt, n, ctx, temperature, top_k, top_p, penalty, seed=0):
    """Like `nanoinfer generate`: penalty over prompt + generated ids, then greedy when
    temperature is 0, else top-k/top-p filtering and a draw (numpy generator `seed`)."""
    rng = np.random.default_rng(seed)
    ids = tok.encode(prompt)
    for _ in range(n):
        logits = ref.forward(cfg, W, ids[-ctx:])[0][-1]
        kept, probs, _, _ = apply(logits, temperature, top_k, top_p, 0.0, penalty, ids)
        ids.append(kept[0] if temperature == 0 else int(rng.choice(kept, p=probs)))
    return tok.decode(ids)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "data", "default-model"))
    a = ap.parse_args()

    def read(name):
        with open(os.path.join(a.model, name)) as f:
            return json.load(f)

    log, ppl, cfg = read("train_log.json"), read("reference_perplexity.json"), read("config.json")
    gen = read("generation_config.json")
    model, W = ref.load_model(a.model)
    tok = bpe.load_tokenizer_json(os.path.join(a.model, "tokenizer.json"))
    ctx = cfg["max_position_embeddings"]
    greedy = generate(model, W, tok, "ROMEO:", 60, ctx, 0, 0, 1.0, gen["repetition_penalty"])
    plain = generate(model, W, tok, "ROMEO:", 60, ctx, 0, 0, 1.0, 1.0)
    sampled = generate(model, W, tok, "ROMEO:", 60, ctx, gen["temperature"], gen["top_k"],
                       gen["top_p"], gen["repetition_penalty"], seed=7)
    args = log["args"]
    rows = "\n".join(f"| {e['step']} | {e['tokens_seen']:,} | {e['train_loss']:.3f} | "
                     f"{e['val_loss']:.3f} | {e['minutes']:.1f} |" for e in log["log"])
    size = os.path.getsize(os.path.join(a.model, "model.safetensors"))
    text = f"""# default-model: a tiny Qwen2 trained on tinyshakespeare

nanoinfer's embedded default model (used when no `-m` is given). Architecture exactly
Qwen2's (q/k/v biases, grouped-query attention, RoPE half-split, tied embeddings, SwiGLU,
RMSNorm), {log['parameters']:,} parameters, stored in bf16 ({size / 2**20:.1f} MiB):

| hidden | layers | heads / kv heads (head_dim) | intermediate | vocab | context | rope_theta |
|---|---|---|---|---|---|---|
| {cfg['hidden_size']} | {cfg['num_hidden_layers']} | {cfg['num_attention_heads']} / {cfg['num_key_value_heads']} ({cfg['hidden_size'] // cfg['num_attention_heads']}) | {cfg['intermediate_size']} | {cfg['vocab_size']} | {cfg['max_position_embeddings']} | {cfg['rope_theta']:g} |

Tokenizer: byte-level BPE trained here ({cfg['vocab_size'] - 3} tokens + `<|endoftext|>`
{cfg['vocab_size'] - 3}, `<|im_start|>` {cfg['vocab_size'] - 2}, `<|im_end|>` {cfg['vocab_size'] - 1}),
written as a Hugging Face tokenizer.json with Qwen2.5's normalizer (NFC), split regex,
byte-level pre-tokenizer and decoder; tokenizer_config.json carries Qwen2.5's ChatML
template verbatim. The model never saw chat markup: chat works mechanically, not usefully.

## Data

`data/tinyshakespeare.txt` (sha256 `{log['data_sha256']}`). Training text: the first 90% of
its characters, cut forward to the next line start ({log['train_tokens']:,} tokens);
held-out: the rest, saved here as `heldout.txt` ({log['heldout_tokens']:,} tokens).

## Training

    /usr/bin/python3 tools/train/train_tokenizer.py
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 tools/train/train_model.py --threads 1 --steps {args['steps']}
    /usr/bin/python3 tools/train/check_tokenizer.py    # tokenizer.json == the JS reference's ids
    /usr/bin/python3 tools/train/model_readme.py       # this file

The run that produced these weights was `{log['command']}` (a time budget that fixed
`--steps {args['steps']}` after timing steps 5-14; the command above replays the same batches
and schedule, bitwise equality of the replay not re-verified). Seed
{args['seed']}; AdamW (betas 0.9/0.95, weight decay {args['weight_decay']} on matrices),
lr {args['lr']:g} with {args['warmup']} warmup steps then cosine to 10%; batch {args['batch']} x {args['ctx']}
random windows; grad clip 1.0; float32; {log['threads']} torch thread on a 2-core machine shared
with compile jobs (one thread was faster than two under that load). Training time
{log['train_minutes']} minutes.

Loss curve (nats/token; held-out = the first 20 windows of heldout.txt, in float32):

| step | tokens seen | train loss | held-out loss | minutes |
|---|---|---|---|---|
{rows}

## Held-out perplexity

**{ppl['perplexity']:.3f} ± {ppl['perplexity_stderr']:.3f}** over {ppl['scored']:,} scored tokens,
computed by the independent float64 reference (`tools/reference/qwen2_reference.py`) on the
stored bf16 weights, with the protocol of `nanoinfer perplexity -c {ppl['ctx']}`: heldout.txt
tokenized without specials; consecutive non-overlapping windows of {ppl['ctx']} tokens (the last
one shorter: {ppl['windows'][-1]['tokens']} tokens); each window starts from an empty cache and
its first token is not scored; NLL from log-softmax, summed in float64;
ppl = exp(NLL sum / tokens scored). `reference_perplexity.json` holds the totals, the
per-window NLL sums and the sha256 of the token ids (int32 LE), for the C++ test (1e-4 rel).
(Per-token perplexity over a {cfg['vocab_size']}-token vocabulary, not per character.)

## Samples (reference forward, float64, prompt "ROMEO:", 60 tokens)

Greedy with generation_config's repetition penalty {gen['repetition_penalty']}, what
`nanoinfer generate -p "ROMEO:" -n 60 --temp 0` should print:

```
{greedy}
```

Pure greedy (`--temp 0 --repeat-penalty 1`):

```
{plain}
```

Sampled with generation_config's values (temperature {gen['temperature']}, top-k {gen['top_k']}, top-p
{gen['top_p']}, repetition penalty {gen['repetition_penalty']}; numpy's generator, seed 7, so other
engines draw differently):

```
{sampled}
```

## Files

config.json, generation_config.json (temperature 0.8, top-k 40, top-p 0.95, repetition
penalty 1.1, eos = [`<|endoftext|>`, `<|im_end|>`]), model.safetensors (bf16, HF Qwen2
names, no lm_head), tokenizer.json, tokenizer_config.json, heldout.txt,
reference_perplexity.json, train_log.json (the run's arguments and loss log).
The reference logits of this model on six prompts are in
`tests/data/models/default-model-reference.safetensors` (last 4 positions per prompt).
"""
    with open(os.path.join(a.model, "README.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
