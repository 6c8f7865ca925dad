#!/usr/bin/env bash
# The installed binary works anywhere: `cmake --install` into a fresh prefix, then run the
# installed nanoinfer from an empty directory with an empty environment and no -m, with the
# checkout out of reach (when user namespaces are available, an empty directory is mounted over
# it, so a read of data/default-model would fail), and compare its greedy text with the build
# tree's binary reading the checkout's data/default-model from disk. Run by CTest (test
# `installed_binary`).
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
# The run itself: from the empty directory, no environment but PATH, no -m.
run='cd "$1" && exec env -i PATH=/usr/bin:/bin HOME="$1" "$2" "${@:3}"'
if unshare --user --map-root-user --mount true 2>/dev/null; then
  hide='mount --bind "$1" "$2" && shift 2 && if [ -e "$0/data/default-model" ]; then echo "still visible"; exit 1; fi && '
  got=$(unshare --user --map-root-user --mount bash -c "$hide$run" "$src" "$tmp/empty" "$src" "$tmp/cwd" "$bin" "${args[@]}" \
        2>"$tmp/got.err") || { echo "installed_binary: the installed run failed:"; cat "$tmp/got.err"; exit 1; }
  echo "installed_binary: ran with $src hidden (an empty directory mounted over it)"
else
  got=$(bash -c "$run" _ "$tmp/cwd" "$bin" "${args[@]}" 2>"$tmp/got.err") ||
    { echo "installed_binary: the installed run failed:"; cat "$tmp/got.err"; exit 1; }
  echo "installed_binary: no user namespaces here; ran from an empty directory with the checkout in place"
fi

if [ "$got" != "$expected" ]; then
  echo "installed_binary: the installed binary's greedy text differs from the build tree's"
  echo "--- build tree, -m $src/data/default-model:"; echo "$expected"
  echo "--- installed, no -m:"; echo "$got"
  exit 1
fi
echo "installed_binary: the same ${#got} characters of greedy text"
