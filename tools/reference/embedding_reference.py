#!/usr/bin/python3
"""Float64 reference embeddings of the tiny models (dev-only; numpy).

For each prompt of a tiny model's reference.safetensors, the final-normed hidden states of the
float64 forward (qwen2_reference.forward, on the stored weights) pooled three ways:
  mean  the average over every position
  cls   the first position
  last  the last position
each L2-normalised, plus the Matryoshka cut (the first H/4 components of the pooled vector,
normalised after the cut) and the last position unnormalised. Written, rounded to F32 only when
stored, to tests/data/models/<name>/embedding_reference.safetensors:

  prompt.K        I32 [T]   the token ids (copied from reference.safetensors)
  mean.K, cls.K, last.K     [H]
  mean_cut.K, cls_cut.K, last_cut.K   [H/4]
  last_raw.K      [H]       the last final-norm row, not normalised

Run from the checkout root (~5 s):
    /usr/bin/python3 tools/reference/embedding_reference.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import qwen2_reference as ref  # noqa: E402
import safetensors_io as st  # noqa: E402

MODELS = ["tiny-qwen3", "tiny-llama", "tiny-gqa7"]


def pooled(final, how):
    if how == "mean":
        return final.mean(axis=0)
    if how == "cls":
        return final[0]
    return final[-1]


def unit(v):
    return v / np.sqrt(np.sum(v * v))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/models"
    for name in MODELS:
        d = os.path.join(root, name)
        cfg, W = ref.load_model(d)
        stored, _ = st.load(os.path.join(d, "reference.safetensors"))
        out = {}
        k = 0
        while f"prompt.{k}" in stored:
            prompt = stored[f"prompt.{k}"]
            _, _, final = ref.forward(cfg, W, [int(t) for t in prompt])
            out[f"prompt.{k}"] = ("I32", prompt.astype(np.int32))
            cut = final.shape[1] // 4
            for how in ("mean", "cls", "last"):
                v = pooled(final, how)
                out[f"{how}.{k}"] = ("F32", unit(v))
                out[f"{how}_cut.{k}"] = ("F32", unit(v[:cut]))
            out[f"last_raw.{k}"] = ("F32", final[-1])
            k += 1
        st.save(os.path.join(d, "embedding_reference.safetensors"), out,
                {"generator": "tools/reference/embedding_reference.py"})
        print(f"{name}: {k} prompts, hidden {final.shape[1]}")


if __name__ == "__main__":
    main()
