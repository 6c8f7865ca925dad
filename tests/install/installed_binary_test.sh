#!/usr/bin/env bash
# The installed binary works anywhere: `cmake --install` into a fresh prefix, then run the
# installed nanoinfer from an empty directory with an empty environment and no -m, with the
# checkout out of reach (when user namespaces are available, an empty directory is mounted over
# it, so a read of data/default-model would fail), and compare its greedy text with the build
# tree's binary reading the checkout's data/default-model from disk; the same for tokenize, and
# the default quantize (whose calibration text is built in too); and check that it was stripped.
# Run by CTest (test `installed_binary`).
#
# usage: installed_binary_test.sh CMAKE BUILD_DIR SOURCE_DIR BUILT_BINARY
set -euo pipefail
cmake=$1 build=$2 src=$3 built=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
bin=$tmp/prefix/bin/nanoinfer
if [ ! -x "$bin" ]; then
  echo "installed_binary: $bin was not installed"; cat "$tmp/install.log"; exit 1
fi

args=(generate -p "ROMEO:" -n 24 --temp 0 -t 1)
expected=$("$built" "${args[@]}" -m "$src/data/default-model" 2>"$tmp/expected.err")
if [ -z "$expected" ]; then
  echo "installed_binary: the build tree's run printed nothing"; cat "$tmp/expected.err"; exit 1
fi

mkdir "$tmp/cwd" "$tmp/empty"
# One run of the installed binary: from the empty directory, no environment but PATH, no -m;
# the checkout hidden under an empty mount when user namespaces allow. Output on stdout.
run='cd "$1" && exec env -i PATH=/usr/bin:/bin HOME="$1" "$2" "${@:3}"'
if unshare --user --map-root-user --mount true 2>/dev/null; then
  hidden=1
  echo "installed_binary: runs with $src hidden (an empty directory mounted over it)"
else
  hidden=0
  echo "installed_binary: no user namespaces here; runs from an empty directory with the checkout in place"
fi
installed() {
  if [ "$hidden" = 1 ]; then
    local hide='mount --bind "$1" "$2" && shift 2 && if [ -e "$0/data/default-model" ]; then echo "still visible"; exit 1; fi && '
    unshare --user --map-root-user --mount bash -c "$hide$run" "$src" "$tmp/empty" "$src" "$tmp/cwd" "$bin" "$@"
  else
    bash -c "$run" _ "$tmp/cwd" "$bin" "$@"
  fi
}

got=$(installed "${args[@]}" 2>"$tmp/got.err") || { echo "installed_binary: the installed run failed:"; cat "$tmp/got.err"; exit 1; }
if [ "$got" != "$expected" ]; then
  echo "installed_binary: the installed binary's greedy text differs from the build tree's"
  echo "--- build tree, -m $src/data/default-model:"; echo "$expected"
  echo "--- installed, no -m:"; echo "$got"
  exit 1
fi
echo "installed_binary: the same ${#got} characters of greedy text"

# tokenize, like generate, defaults to the embedded model.
tok_args=(tokenize -p "ROMEO: what light" --ids)
tok_expected=$("$built" "${tok_args[@]}" -m "$src/data/default-model")
tok_got=$(installed "${tok_args[@]}" 2>"$tmp/tok.err") || { echo "installed_binary: tokenize failed:"; cat "$tmp/tok.err"; exit 1; }
if [ "$tok_got" != "$tok_expected" ]; then
  echo "installed_binary: tokenize without -m gave $tok_got, the build tree with -m $tok_expected"; exit 1
fi
echo "installed_binary: tokenize without -m: $tok_got"

# quantize calibrates (gptq, the default method) on its built-in text, not the checkout's file.
installed quantize --type int8 --calib-windows 2 -t 1 --out q >"$tmp/quant.out" 2>"$tmp/quant.err" ||
  { echo "installed_binary: the default quantize failed:"; cat "$tmp/quant.err"; exit 1; }
if [ ! -f "$tmp/cwd/q/model.safetensors" ] || ! grep -q "tinyshakespeare.txt" "$tmp/quant.out"; then
  echo "installed_binary: quantize wrote no model or named no calibration text:"; cat "$tmp/quant.out" "$tmp/quant.err"; exit 1
fi
echo "installed_binary: quantize $(grep -o 'calibrated on .*' "$tmp/quant.out")"

# Installed stripped: no symbol table (the build tree's binary keeps one).
if command -v readelf >/dev/null; then
  if readelf -S --wide "$bin" | grep -q '\.symtab'; then
    echo "installed_binary: $bin still has a symbol table (not stripped)"; exit 1
  fi
  echo "installed_binary: installed stripped, $(stat -c %s "$bin") bytes (the build tree's: $(stat -c %s "$built"))"
fi
