#!/usr/bin/env bash
# The commands under mpirun give what they give alone: greedy generate (2 and 3 ranks),
# perplexity, and serve answering concurrent requests (continuous batching) with the same
# greedy completions. Usage: cli_split_test.sh MPIRUN NANOINFER
set -eu
mpirun=$1
nanoinfer=$2
dir=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill $server 2>/dev/null; rm -rf "$dir"' EXIT
run() { "$mpirun" --oversubscribe --allow-run-as-root "$@"; }
fail() {
  echo "FAIL: $*"
  exit 1
}

"$nanoinfer" generate -t 1 -p "Once upon a time" -n 48 --temp 0 >"$dir/alone.txt" 2>/dev/null
for np in 2 3; do
  run -np $np "$nanoinfer" generate -t 1 -p "Once upon a time" -n 48 --temp 0 >"$dir/split.txt" 2>/dev/null
  cmp -s "$dir/alone.txt" "$dir/split.txt" || fail "generate under -np $np differs: $(cat "$dir/split.txt")"
done
echo "ok: generate, 2 and 3 ranks"

"$nanoinfer" perplexity -t 1 -f "$(dirname "$0")/../../data/default-model/heldout.txt" -c 128 2>/dev/null |
  grep -o "perplexity [0-9.]*" >"$dir/ppl-alone.txt" || true
run -np 2 "$nanoinfer" perplexity -t 1 -f "$(dirname "$0")/../../data/default-model/heldout.txt" -c 128 2>/dev/null |
  grep -o "perplexity [0-9.]*" >"$dir/ppl-split.txt" || true
[ -s "$dir/ppl-alone.txt" ] || fail "no perplexity printed"
# Within the split's summation-order tolerance (tests/dist/tensor_parallel_test.cpp), far
# tighter here: a perplexity averages many positions' errors.
awk -v a="$(cut -d' ' -f2 "$dir/ppl-alone.txt")" -v b="$(cut -d' ' -f2 "$dir/ppl-split.txt")" \
  'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 1e-4 * a) }' ||
  fail "perplexity: $(cat "$dir/ppl-alone.txt") alone, $(cat "$dir/ppl-split.txt") split"
echo "ok: perplexity, 2 ranks: $(cat "$dir/ppl-split.txt")"

completions() {  # port -> the three greedy completions, asked for at once
  local asks=()
  for p in "Once upon a time" "The cat" "Hello"; do
    curl -s "localhost:$1/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"prompt\":\"$p\",\"max_tokens\":16,\"temperature\":0}" >"$dir/reply-$1-${p// /_}.json" &
    asks+=($!)
  done
  wait "${asks[@]}"
  cat "$dir"/reply-"$1"-*.json | grep -o '"text":"[^"]*"'
}
serve() {  # port launcher... : starts serve, waits for it, prints the completions
  local port=$1
  shift
  "$@" "$nanoinfer" serve -t 1 --port "$port" >/dev/null 2>"$dir/serve-$port.err" &
  server=$!
  for _ in $(seq 300); do
    curl -s "localhost:$port/v1/models" >/dev/null && break
    sleep 0.1
  done
  completions "$port"
  kill $server
  wait $server || true
  server=""
}
port=$((20000 + RANDOM % 20000))
serve $port env >"$dir/serve-alone.txt"
serve $((port + 1)) "$mpirun" --oversubscribe --allow-run-as-root -np 2 >"$dir/serve-split.txt"
[ "$(wc -l <"$dir/serve-alone.txt")" -eq 3 ] || fail "serve alone answered: $(cat "$dir/serve-alone.txt")"
cmp -s "$dir/serve-alone.txt" "$dir/serve-split.txt" ||
  fail "serve under -np 2: $(cat "$dir/serve-split.txt") against $(cat "$dir/serve-alone.txt")"
echo "ok: serve, 2 ranks, 3 concurrent requests"
