// Reference tokenizer for nanoinfer's tests: @huggingface/tokenizers (pure JS, pinned in
// package.json) run on the same tokenizer.json. Reads one JSON object per line,
// {"hex": "<bytes of the text, hex>"}, and writes one per line,
// {"ids": [...], "decoded": "<decode(ids)>"}.
// The bytes are turned into a string with TextDecoder (invalid UTF-8 -> U+FFFD per maximal
// subpart), exactly as nanoinfer defines encode() on invalid input.
//
// usage: node encode.mjs MODEL_DIR IN.jsonl OUT.jsonl [DEPS_DIR]
//   MODEL_DIR holds tokenizer.json and tokenizer_config.json; DEPS_DIR (default: .deps at
//   the checkout root) holds tokenizer-reference/node_modules, installed by
//   scripts/fetch-test-assets.sh.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [modelDir, inPath, outPath, depsArg] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node encode.mjs MODEL_DIR IN.jsonl OUT.jsonl [DEPS_DIR]");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const depsDir = depsArg ?? path.join(here, "..", "..", ".deps");
const require = createRequire(path.join(depsDir, "tokenizer-reference", "package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");

const tokenizerJson = JSON.parse(readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

const out = [];
for (const line of readFileSync(inPath, "utf8").split("\n")) {
  if (line.length === 0) continue;
  const text = decoder.decode(Buffer.from(JSON.parse(line).hex, "hex"));
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  const decoded = ids.length === 0 ? "" : tokenizer.decode(ids);
  out.push(JSON.stringify({ ids, decoded }));
}
writeFileSync(outPath, out.join("\n") + "\n");
