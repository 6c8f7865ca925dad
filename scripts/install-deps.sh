#!/usr/bin/env bash
# Installs everything nanoinfer needs to build and test, on Debian 12 / Ubuntu 24.04.
# Idempotent: packages already present are skipped; test assets already fetched and
# verified are kept. Run as root or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
  build-essential cmake ninja-build pkg-config clang
  clang-format  # scripts/check-format.sh, run as the clang_format test
  libcli11-dev nlohmann-json3-dev libsimdjson-dev libfmt-dev libxsimd-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev  # the HTTP server of `nanoinfer serve`
  libcurl4-openssl-dev libssl-dev  # `nanoinfer pull`: HTTPS downloads from the Hugging Face hub, sha256 checks
  openmpi-bin libopenmpi-dev  # tensor parallelism under mpirun (docs/SCALING.md)
  libedit-dev  # line editing and history in `nanoinfer chat` (BSD licence)
  haproxy  # the load balancer of docs/haproxy.cfg, run by the serve_balance test
  chromium  # the browser the viz page is tested in (tests/browser/, driven by playwright-core)
)
# Node.js runs the reference tokenizer in the tests; keep an existing install.
if ! command -v node >/dev/null 2>&1; then packages+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

bash scripts/fetch-test-assets.sh
