"""Byte-level BPE in the Qwen2 / GPT-2 conventions (dev-only): pre-tokenizer, trainer,
encoder and decoder, plus the Hugging Face tokenizer.json writer.

Pipeline (what a Hugging Face tokenizer.json with Qwen2.5's settings does):
  NFC normalize -> split with Qwen2's regex (matches and gaps are pieces, "Isolated") ->
  each piece's UTF-8 bytes -> BPE merges by rank (lowest rank first; among equal ranks the
  leftmost pair first) -> ids. Vocabulary strings spell bytes with GPT-2's byte-to-unicode map.
"""

import json
import unicodedata

import regex

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_SPLIT = regex.compile(QWEN2_SPLIT)


def bytes_to_unicode():
    """GPT-2's map from each byte to a printable character; returned in GPT-2's order
    (printable bytes first), which is also the order of the first 256 vocabulary ids."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    out, n = [], 0
    for b in range(256):
        if b in printable:
            out.append((b, chr(b)))
    for b in range(256):
        if b not in printable:
            out.append((b, chr(256 + n)))
            n += 1
    return out


def pretokenize(text):
    """NFC, then Qwen2's split; gaps between matches (none for this regex) are kept too."""
    text = unicodedata.normalize("NFC", text)
    pieces, at = [], 0
    for m in _SPLIT.finditer(text):
        if m.start() > at:
            pieces.append(text[at:m.start()])
        pieces.append(m.group())
        at = m.end()
    if at < len(text):
        pieces.append(text[at:])
    return pieces


def train(text, vocab_size):
    """Learns merges until the vocabulary (256 bytes + merges + specials) has vocab_size
    entries. Ties between equally frequent pairs go to the pair of lowest (left id, right id).
    Returns (strings: id -> byte string, merges: [(left id, right id, result id)])."""
    counts = {}
    for piece in pretokenize(text):
        counts[piece] = counts.get(piece, 0) + 1
    order = [b for b, _ in bytes_to_unicode()]
    id_of_byte = {b: i for i, b in enumerate(order)}
    strings = [bytes([b]) for b in order]
    words = [[id_of_byte[b] for b in w.encode("utf-8")] for w in sorted(counts)]
    freq = [counts[w] for w in sorted(counts)]
    pair_count, where = {}, {}
    for wi, w in enumerate(words):
        for p in zip(w, w[1:]):
            pair_count[p] = pair_count.get(p, 0) + freq[wi]
            where.setdefault(p, set()).add(wi)
    id_of_string = {s: i for i, s in enumerate(strings)}
    merges = []
    while len(strings) + len(SPECIALS) < vocab_size and pair_count:
        best = max(pair_count.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))[0]
        a, b = best
        joined = strings[a] + strings[b]
        if joined in id_of_string:  # another merge path already made this string
            c = id_of_string[joined]
        else:
            c = len(strings)
            strings.append(joined)
            id_of_string[joined] = c
        merges.append((a, b, c))
        for wi in sorted(where.pop(best)):
            w = words[wi]
            for p in zip(w, w[1:]):
                pair_count[p] -= freq[wi]
                if pair_count[p] == 0:
                    del pair_count[p]
            merged, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    merged.append(c)
                    i += 2
                else:
                    merged.append(w[i])
                    i += 1
            words[wi] = merged
            for p in zip(merged, merged[1:]):
                pair_count[p] = pair_count.get(p, 0) + freq[wi]
                where.setdefault(p, set()).add(wi)
        pair_count.pop(best, None)
    return strings, merges


class Tokenizer:
    def __init__(self, strings, merges):
        self.strings = strings
        self.rank = {(a, b): (r, c) for r, (a, b, c) in enumerate(merges)}
        byte_order = [b for b, _ in bytes_to_unicode()]
        self.byte_id = {b: i for i, b in enumerate(byte_order)}
        self.special = {s: len(strings) + i for i, s in enumerate(SPECIALS)}
        self.cache = {}

    def encode_piece(self, piece):
        hit = self.cache.get(piece)
        if hit is not None:
            return hit
        w = [self.byte_id[b] for b in piece.encode("utf-8")]
        while len(w) > 1:
            best = min((self.rank.get(p, (1 << 60, 0))[0], i) for i, p in enumerate(zip(w, w[1:])))
            if best[0] == 1 << 60:
                break
            a, b = w[best[1]], w[best[1] + 1]
            c = self.rank[(a, b)][1]
            merged, i = [], 0
            while i < len(w):  # all non-overlapping occurrences, left to right
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    merged.append(c)
                    i += 2
                else:
                    merged.append(w[i])
                    i += 1
            w = merged
        self.cache[piece] = w
        return w

    def encode(self, text):
        """Plain text (special-token strings are not recognized here)."""
        return [t for piece in pretokenize(text) for t in self.encode_piece(piece)]

    def decode(self, ids):
        inv = {v: k for k, v in self.special.items()}
        return b"".join(inv[i].encode() if i in inv else self.strings[i] for i in ids).decode(
            "utf-8", errors="replace")


def tokenizer_json(strings, merges):
    """The Hugging Face tokenizer.json document, field for field like Qwen2.5's."""
    to_char = dict(bytes_to_unicode())

    def spell(bs):
        return "".join(to_char[b] for b in bs)

    vocab = {spell(s): i for i, s in enumerate(strings)}
    assert len(vocab) == len(strings)
    n = len(strings)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": n + i, "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, s in enumerate(SPECIALS)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                           "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": [[spell(strings[a]), spell(strings[b])] for a, b, _ in merges]},
    }


def load_tokenizer_json(path):
    """Reads back a tokenizer.json written by tokenizer_json()."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    from_char = {c: b for b, c in bytes_to_unicode()}
    vocab = doc["model"]["vocab"]
    strings = [None] * len(vocab)
    for s, i in vocab.items():
        strings[i] = bytes(from_char[ch] for ch in s)
    merges = [(vocab[a], vocab[b], vocab[a + b]) for a, b in doc["model"]["merges"]]
    return Tokenizer(strings, merges)
