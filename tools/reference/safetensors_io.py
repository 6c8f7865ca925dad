"""Minimal safetensors reader/writer (numpy only), written from the format description.

File layout: u64 little-endian N, then N bytes of UTF-8 JSON mapping each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the byte after the
header), then the raw little-endian tensor bytes. We pad the JSON with spaces to a multiple
of 8 bytes so the data section is aligned, and write tensors in sorted-name order with keys
sorted, so the same tensors always produce the same bytes.

bf16 has no numpy dtype: BF16 tensors are handled as uint16 bit patterns.
"""

import json
import struct

import numpy as np

_NUMPY_OF = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
             "BF16": np.uint16, "F16": np.float16, "U8": np.uint8, "I8": np.int8}


def f32_to_bf16_bits(a):
    """Round float32 values to bf16, nearest-even (same rule as nanoinfer::f32_to_bf16)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    assert not np.isnan(a).any(), "NaN weights are not expected here"
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_to_bf16(a):
    """float array -> the nearest bf16 values, returned as float64."""
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(a, dtype=np.float32))).astype(np.float64)


def save(path, tensors, metadata=None):
    """tensors: name -> (dtype string, numpy array). For "BF16" pass float data (rounded
    here, nearest-even) or uint16 bit patterns."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        dtype, array = tensors[name]
        if dtype == "BF16" and array.dtype != np.uint16:
            data = f32_to_bf16_bits(array)
        else:
            data = np.ascontiguousarray(array, dtype=_NUMPY_OF[dtype])
        raw = data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load(path):
    """-> (name -> numpy array, with BF16 widened to float32; metadata dict)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        a = np.frombuffer(blob[base + begin:base + end], dtype=_NUMPY_OF[info["dtype"]])
        if info["dtype"] == "BF16":
            a = bf16_bits_to_f32(a)
        out[name] = a.reshape(info["shape"]).copy()
    return out, metadata
