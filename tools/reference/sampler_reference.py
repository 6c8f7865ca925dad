#!/usr/bin/python3
"""Sampler expectations for the C++ sampler tests (dev-only; numpy, float64).

Writes tests/data/sampler/cases.json: random logit vectors (sizes 5..300) with forced ties,
sampling parameters, and the expected candidate set (kept token ids and their final
probabilities). Regenerate (byte-identical on rerun):

    /usr/bin/python3 tools/reference/sampler_reference.py

The semantics follow Hugging Face's documented logits processors, applied in this order
(the text is also stored in the JSON file as "semantics"):
"""

import json
import os

import numpy as np

SEMANTICS = [
    "All arithmetic in float64 on the given logits (each logit is exactly representable in f32).",
    "1. repetition penalty r (1 disables): for each DISTINCT id in previous_tokens, "
    "logit = logit < 0 ? logit * r : logit / r (HF RepetitionPenaltyLogitsProcessor).",
    "2. temperature t: t == 0 means greedy: the result is the single argmax of the penalized "
    "logits, the LOWEST index among equal maxima, with probability 1; no other step applies. "
    "Otherwise logit = logit / t.",
    "3. top-k k (0, or k >= n, disables): keep every token whose logit >= the k-th largest "
    "logit, so ties at the boundary are all kept (HF TopKLogitsWarper).",
    "4. top-p p (1 disables): over the tokens still kept, probs = softmax(logits); sort the kept "
    "tokens ASCENDING by logit with a STABLE sort (equal logits stay in increasing token-id "
    "order, so among ties the lower id comes first, i.e. is treated as less probable); "
    "cumulative sum of probs in that order; remove every token whose cumulative sum is "
    "<= 1 - p; the last token of the order (the maximum; among equal maxima the HIGHEST id) "
    "is always kept (HF TopPLogitsWarper with a stable sort). A tie group can therefore be "
    "split: its lower ids removed, its higher ids kept.",
    "5. min-p m (0 disables): over the tokens still kept, probs = softmax(logits); remove "
    "tokens with prob < m * max(prob) (HF MinPLogitsWarper); the maximum always survives.",
    "6. expected.kept = surviving token ids in increasing order; expected.probs = softmax of "
    "their logits after steps 1-2 (i.e. renormalized over the survivors), same order.",
    "counts = number of tokens kept after each of top_k, top_p, min_p.",
    "top_p_margin = min over kept-before-top-p tokens of |cumsum - (1 - p)| (a float32 engine "
    "should agree when this is >> 1e-6); min_p_margin = min |prob - m * max(prob)| likewise, "
    "ignoring exact equality (m = 1 with tied maxima, which any engine computes identically).",
]


def apply(logits, temperature, top_k, top_p, min_p, penalty, previous):
    z = np.array(logits, dtype=np.float64)
    n = len(z)
    for t in sorted(set(previous)):
        z[t] = z[t] * penalty if z[t] < 0 else z[t] / penalty
    if temperature == 0:
        i = int(np.argmax(z))  # first maximum = lowest index
        return [i], [1.0], {}, {}
    z = z / temperature
    keep = np.ones(n, dtype=bool)
    if 0 < top_k < n:
        kth = np.sort(z)[-top_k]
        keep &= z >= kth
    counts = {"top_k": int(keep.sum())}
    margins = {}
    if top_p < 1.0:
        ids = np.flatnonzero(keep)
        order = ids[np.argsort(z[ids], kind="stable")]  # ascending, ties by id
        p = np.exp(z[order] - z[order].max())
        p /= p.sum()
        cum = np.cumsum(p)
        remove = cum <= 1.0 - top_p
        remove[-1] = False
        keep[order[remove]] = False
        margins["top_p_margin"] = float(np.abs(cum - (1.0 - top_p)).min())
    counts["top_p"] = int(keep.sum())
    if min_p > 0.0:
        ids = np.flatnonzero(keep)
        p = np.exp(z[ids] - z[ids].max())
        p /= p.sum()
        keep[ids[p < min_p * p.max()]] = False
        gap = np.abs(p - min_p * p.max())
        margins["min_p_margin"] = float(gap[gap > 0].min()) if (gap > 0).any() else 1.0
    counts["min_p"] = int(keep.sum())
    ids = np.flatnonzero(keep)
    p = np.exp(z[ids] - z[ids].max())
    p /= p.sum()
    return [int(i) for i in ids], [float(x) for x in p], counts, margins


def tied_logits(rng, n, n_groups=3, group=3):
    """Logits on a grid of 1/32 (exact in f32, distinct values far apart relative to f32
    rounding) with several values duplicated at random positions."""
    z = np.round(rng.normal(0.0, 2.0, n) * 32) / 32
    for _ in range(min(n_groups, n // group)):
        src = rng.integers(n)
        z[rng.choice(n, size=group, replace=False)] = z[src]
    return z


def top_p_in_tie(z, temperature, top_k, penalty, previous):
    """A top-p whose threshold 1-p falls in the middle of a tie group (after top-k), so the
    group is split; None if no group of >= 2 kept ties exists."""
    zz = np.array(z)
    for t in sorted(set(previous)):
        zz[t] = zz[t] * penalty if zz[t] < 0 else zz[t] / penalty
    zz = zz / temperature
    keep = np.ones(len(zz), bool)
    if 0 < top_k < len(zz):
        keep &= zz >= np.sort(zz)[-top_k]
    ids = np.flatnonzero(keep)
    order = ids[np.argsort(zz[ids], kind="stable")]
    p = np.exp(zz[order] - zz[order].max())
    p /= p.sum()
    cum = np.cumsum(p)
    v = zz[order]
    # pick the highest-probability tie group that is not the maximum itself
    best = None
    for a in range(len(order) - 2):
        if v[a] == v[a + 1] and v[a] != v[-1] and p[a] > 1e-3:
            best = a
    if best is None:
        return None
    return float(1.0 - 0.5 * (cum[best] + cum[best + 1]))


def make_cases():
    rng = np.random.default_rng(4242)
    cases = []

    def add(name, z, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, penalty=1.0, previous=()):
        previous = [int(t) for t in previous]
        kept, probs, counts, margins = apply(z, temperature, top_k, top_p, min_p, penalty, previous)
        case = {"name": name, "logits": [float(x) for x in z], "temperature": temperature,
                "top_k": top_k, "top_p": top_p, "min_p": min_p, "repetition_penalty": penalty,
                "previous_tokens": previous, "expected": {"kept": kept, "probs": probs}}
        if counts:
            case["counts"] = counts
        case.update(margins)
        cases.append(case)

    # Greedy: ties at the maximum go to the lowest id; the penalty can move the argmax.
    z = tied_logits(rng, 7)
    z[[2, 5]] = z.max() + 1.0
    add("greedy_tie_at_max", z, temperature=0.0)
    z = tied_logits(rng, 50)
    add("greedy_plain", z, temperature=0.0)
    z = tied_logits(rng, 40)
    top = int(np.argmax(z))
    add("greedy_penalty_moves_argmax", z, temperature=0.0, penalty=50.0, previous=[top, top])
    z = np.full(5, 0.5)
    add("greedy_all_equal", z, temperature=0.0, top_k=3, top_p=0.5)

    # Nothing enabled: full softmax.
    add("all_disabled", tied_logits(rng, 12))
    add("temperature_only_hot", tied_logits(rng, 30), temperature=1.7)
    add("temperature_only_cold", tied_logits(rng, 30), temperature=0.3)

    # top-k with ties at the k-th value: all kept, so more than k survive.
    for i, (n, k) in enumerate([(10, 3), (64, 5), (100, 20), (300, 40), (6, 2), (257, 1)]):
        z = tied_logits(rng, n)
        order = np.argsort(-z, kind="stable")
        z[order[k:k + 2]] = z[order[k - 1]]  # two more copies of the k-th largest value
        add(f"top_k_tie_boundary_{i}", z, temperature=float(rng.choice([0.7, 1.0, 1.3])),
            top_k=k)
    z = tied_logits(rng, 8)
    add("top_k_ge_n_disabled", z, top_k=8)
    z = tied_logits(rng, 5)
    add("top_k_larger_than_n", z, top_k=50)

    # top-p with the threshold inside a tie group: the group is split by token id.
    made = 0
    while made < 8:
        n = int(rng.integers(5, 300))
        z = tied_logits(rng, n, n_groups=6, group=int(rng.integers(2, 5)))
        t = float(rng.choice([0.5, 0.8, 1.0, 1.5]))
        k = int(rng.choice([0, 0, 10, 50]))
        p = top_p_in_tie(z, t, k, 1.0, [])
        if p is None or not 0.0 < p < 1.0:
            continue
        add(f"top_p_tie_boundary_{made}", z, temperature=t, top_k=k, top_p=round(p, 12))
        made += 1
    # top-p so small only the maximum stays; with tied maxima that is the HIGHEST id.
    z = tied_logits(rng, 20)
    z[[3, 11, 17]] = z.max() + 2.0
    add("top_p_tiny_tied_max", z, top_p=0.01)
    add("top_p_tiny", tied_logits(rng, 90), top_p=1e-3)
    add("top_p_0.9", tied_logits(rng, 150), temperature=0.8, top_p=0.9)
    add("top_p_0.5_topk", tied_logits(rng, 200), temperature=1.2, top_k=30, top_p=0.5)

    # min-p, with tie groups entirely in or out.
    for i, (n, m) in enumerate([(40, 0.05), (120, 0.2), (9, 0.5), (300, 0.01)]):
        add(f"min_p_{i}", tied_logits(rng, n, n_groups=5), temperature=0.9, min_p=m)
    z = tied_logits(rng, 10)
    z[[1, 4, 7]] = z.max()
    add("min_p_1_keeps_tied_max", z, min_p=1.0)

    # Repetition penalty: positive divided, negative multiplied, each distinct id once.
    for i in range(5):
        n = int(rng.integers(5, 120))
        z = tied_logits(rng, n)
        prev = rng.integers(0, n, int(rng.integers(1, 12)))
        prev = np.concatenate([prev, prev[:2]])  # repeats must not compound the penalty
        neg, pos = np.flatnonzero(z < 0), np.flatnonzero(z > 0)
        if len(neg) and len(pos):
            prev = np.concatenate([prev, [neg[0], pos[0]]])
        add(f"repetition_penalty_{i}", z, temperature=float(rng.choice([0.7, 1.0])),
            top_k=int(rng.choice([0, 20])), penalty=float(rng.choice([1.1, 1.3, 2.0])),
            previous=prev)

    # Everything at once (Qwen2.5 defaults and others), random sizes.
    for i, (t, k, p, m, r) in enumerate([(0.7, 20, 0.8, 0.0, 1.1), (0.8, 40, 0.95, 0.05, 1.1),
                                         (1.0, 0, 0.9, 0.1, 1.2), (0.6, 10, 0.7, 0.02, 1.05),
                                         (1.3, 100, 0.99, 0.0, 1.0), (0.9, 5, 1.0, 0.3, 1.5)]):
        n = int(rng.integers(5, 301))
        z = tied_logits(rng, n, n_groups=8)
        prev = rng.integers(0, n, 6)
        add(f"combined_{i}", z, temperature=t, top_k=k, top_p=p, min_p=m, penalty=r,
            previous=prev)
    return cases


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    out = os.path.join(root, "tests", "data", "sampler", "cases.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cases = make_cases()
    for c in cases:  # thresholds must not sit on a value an f32 engine could round across
        assert c.get("top_p_margin", 1.0) > 1e-6 and c.get("min_p_margin", 1.0) > 1e-6, c["name"]
    with open(out, "w") as f:
        json.dump({"generator": "tools/reference/sampler_reference.py",
                   "semantics": SEMANTICS, "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"wrote {out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
