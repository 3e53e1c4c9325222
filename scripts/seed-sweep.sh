#!/usr/bin/env bash
# Runs one test binary's randomized tests for every seed in [FIRST, LAST] (KVF_TEST_SEED),
# and stops at the first seed that fails, printing it so the failure can be replayed.
# Usage: scripts/seed-sweep.sh TEST_BINARY GTEST_FILTER [FIRST] [LAST]
# e.g.   scripts/seed-sweep.sh build/tests/test_llm '*Driver*:*Alone*' 1 500
set -uo pipefail

bin=$1 filter=$2 first=${3:-1} last=${4:-500}
export KVF_SOURCE_DIR=${KVF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
for ((seed = first; seed <= last; ++seed)); do
  if ! KVF_TEST_SEED=$seed "$bin" --gtest_filter="$filter" >"$log" 2>&1; then
    grep -E '^\[  FAILED  \]|Failure|Expected|Which is' "$log" | head -20
    echo "seed-sweep: $bin failed at seed $seed (replay: KVF_TEST_SEED=$seed $bin --gtest_filter='$filter')"
    exit 1
  fi
done
tests=$(grep -oE '^\[==========\] [0-9]+ tests?' "$log" | grep -oE '[0-9]+' | head -1)
echo "seed-sweep: seeds $first..$last passed ($tests tests each) in $(($(date +%s) - start)) s"
