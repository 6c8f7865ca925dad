#!/usr/bin/env bash
# Checks that every C++ file of the project is as clang-format (.clang-format) writes it.
# Prints the files that differ and exits 1; exit 77 (a skipped test) without clang-format.
# To format: scripts/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check-format: skipped: clang-format not found (run scripts/install-deps.sh)"
  exit 77
fi
mapfile -t files < <(find src include kernels tests fuzz bench -type f \( -name '*.cpp' -o -name '*.h' \) \
                       -not -path 'tests/data/*' | sort)
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  printf 'check-format: not as clang-format writes it: %s\n' "${bad[@]}"
  echo "check-format: ${#bad[@]} of ${#files[@]} files; run scripts/check-format.sh --fix"
  exit 1
fi
echo "check-format: ${#files[@]} files as clang-format writes them"
