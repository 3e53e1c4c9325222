#!/usr/bin/env bash
# Installs the Debian packages kvforge needs to build, test and benchmark.
# Idempotent and non-interactive: it asks apt only for what is missing.
#   --train  also what retraining the built-in model needs here (tools/kjv/prepare.py):
#            the King James Bible of Debian's bible-kjv
set -euo pipefail

packages=(
  build-essential cmake ninja-build clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libpcre2-dev libutf8proc-dev nlohmann-json3-dev pkg-config
  libcpp-httplib-dev python3-prometheus-client wrk
  python3-jinja2
  gnuplot-nox
)
if [ "${1:-}" = "--train" ]; then
  packages+=(bible-kjv)
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--train]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
