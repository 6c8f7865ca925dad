#!/usr/bin/python3
"""Trains the default model's byte-level BPE tokenizer on the first 90% of tinyshakespeare
and writes tokenizer.json + tokenizer_config.json (dev-only; needs python3-regex).

    /usr/bin/python3 tools/train/train_tokenizer.py [--data data/tinyshakespeare.txt]
        [--vocab 2048] [--out data/default-model]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def split_text(path):
    """(train, heldout): the first 90% and the last 10% of the characters. The cut is moved
    forward to the next line start so neither part begins mid-line."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    cut = int(len(text) * 0.9)
    cut = text.index("\n", cut) + 1
    return text[:cut], text[cut:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    ap.add_argument("--vocab", type=int, default=2048, help="total, including 3 specials")
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "default-model"))
    args = ap.parse_args()
    train_text, _ = split_text(args.data)
    t0 = time.time()
    strings, merges = bpe.train(train_text, args.vocab)
    print(f"{len(merges)} merges, {len(strings)} BPE tokens + {len(bpe.SPECIALS)} specials "
          f"in {time.time() - t0:.1f} s")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(bpe.tokenizer_json(strings, merges), f, ensure_ascii=False, indent=1)
        f.write("\n")
    # Qwen2.5's tokenizer_config.json, with its ChatML template verbatim, so chat renders
    # exactly as for the real model; only the added-token ids differ.
    with open(os.path.join(ROOT, "data", "qwen2.5-0.5b-instruct", "tokenizer_config.json")) as f:
        qwen = json.load(f)
    n = len(strings)
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(n + i): {"content": s, "lstrip": False, "normalized": False,
                                              "rstrip": False, "single_word": False,
                                              "special": True}
                                 for i, s in enumerate(bpe.SPECIALS)},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": qwen["chat_template"],
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 256,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
