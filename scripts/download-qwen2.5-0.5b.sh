#!/usr/bin/env bash
# Downloads the five files of Qwen/Qwen2.5-0.5B-Instruct that nanoinfer reads, pinned to one
# revision of the Hugging Face repository, into a model directory (default models/qwen2.5-0.5b-instruct).
#
#   scripts/download-qwen2.5-0.5b.sh [OUT_DIR]
#
# Needs internet access to huggingface.co, which the project's own machines do not have: this
# script has never been run there. Use `nanoinfer synth` for a same-shaped synthetic model.
# The revision is the commit used widely in public code to pin this model; the files' sha256
# sums are not known to us. The size of model.safetensors is compared with 988,097,824 bytes
# (as reported publicly, not verified by us; a mismatch is a warning), and
# `nanoinfer inspect OUT_DIR` validates every tensor.
# Each file is downloaded to a temporary name and renamed when complete; finished files are
# skipped on a re-run.
set -euo pipefail

REPO="Qwen/Qwen2.5-0.5B-Instruct"
REVISION="${QWEN_REVISION:-7ae557604adf67be50417f59c2c2f167def9a775}"
OUT="${1:-models/qwen2.5-0.5b-instruct}"
FILES=(config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors)
EXPECTED_MODEL_BYTES=988097824

mkdir -p "$OUT"
for f in "${FILES[@]}"; do
  if [ -s "$OUT/$f" ]; then
    echo "download: $OUT/$f exists, skipping"
    continue
  fi
  url="https://huggingface.co/$REPO/resolve/$REVISION/$f"
  echo "download: $url"
  curl --fail --location --retry 3 --output "$OUT/$f.part" "$url"
  mv "$OUT/$f.part" "$OUT/$f"
done

size=$(stat -c %s "$OUT/model.safetensors")
if [ "$size" != "$EXPECTED_MODEL_BYTES" ]; then
  echo "download: warning: $OUT/model.safetensors is $size bytes, expected $EXPECTED_MODEL_BYTES" >&2
fi
echo "download: done; check it with: nanoinfer inspect $OUT"
