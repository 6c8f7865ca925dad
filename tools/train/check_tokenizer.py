#!/usr/bin/python3
"""Checks the trained tokenizer.json against the reference tokenizer (@huggingface/tokenizers,
pure JS, installed in .deps/ by scripts/fetch-test-assets.sh): the ids of the held-out text,
a slice of the training text and a few edge strings must equal bpe.py's encoder's, which is
what train_model.py trains on. Special tokens are checked on the reference side only.

    /usr/bin/python3 tools/train/check_tokenizer.py [--model data/default-model]
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
from train_tokenizer import ROOT, split_text  # noqa: E402

NODE = r"""
import { readFileSync } from "node:fs";
import { Tokenizer } from "TOKENIZERS_MJS";
const [dir, inputs] = process.argv.slice(2);
const tok = new Tokenizer(JSON.parse(readFileSync(dir + "/tokenizer.json", "utf8")),
                          JSON.parse(readFileSync(dir + "/tokenizer_config.json", "utf8")));
const texts = JSON.parse(readFileSync(inputs, "utf8"));
process.stdout.write(JSON.stringify(texts.map((t) => tok.encode(t).ids)));
"""

EDGE = ["ROMEO:", "Hello, world!", "  two  spaces\n\n\nnewlines\r\n", "It's 1234 o'clock, you'll SEE",
        "caf\u00e9 cafe\u0301 \u00c5ngstr\u00f6m", "\u65e5\u672c\u8a9e \U0001F600 emoji", "\t tab",
        "don'T WE'LL", "", " ", "x" * 300]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "data", "default-model"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    args = ap.parse_args()
    train_text, heldout = split_text(args.data)
    ours = bpe.load_tokenizer_json(os.path.join(args.model, "tokenizer.json"))
    texts = [heldout, train_text[:200000]] + EDGE
    specials = ["<|im_start|>user\nhi<|im_end|>\n<|endoftext|>"]
    inputs = "/tmp/check_tokenizer_inputs.json"
    with open(inputs, "w") as f:
        json.dump(texts + specials, f)
    mjs = os.path.abspath(os.path.join(ROOT, ".deps", "tokenizer-reference", "node_modules",
                                       "@huggingface", "tokenizers", "dist", "tokenizers.mjs"))
    if not os.path.exists(mjs):
        sys.exit(f"{mjs} missing: run scripts/fetch-test-assets.sh")
    script = "/tmp/check_tokenizer.mjs"
    with open(script, "w") as f:
        f.write(NODE.replace("TOKENIZERS_MJS", mjs))
    out = subprocess.run(["node", script, os.path.abspath(args.model), inputs],
                         check=True, capture_output=True, text=True).stdout
    ref = json.loads(out)
    bad = 0
    for text, ids in zip(texts, ref):
        mine = ours.encode(text)
        if mine != ids:
            bad += 1
            print(f"MISMATCH on {text[:40]!r}: ours {mine[:20]} ref {ids[:20]}")
        assert ours.decode(mine) == __import__("unicodedata").normalize("NFC", text)
    n = len(ours.strings)
    want = [n + 1] + ours.encode("user\nhi") + [n + 2] + ours.encode("\n") + [n]
    if ref[-1] != want:
        bad += 1
        print(f"MISMATCH on specials: ref {ref[-1]} expected {want}")
    print(f"{len(texts) + 1} strings, {sum(len(r) for r in ref)} reference ids; "
          f"held-out text: {len(ref[0])} tokens; {bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
