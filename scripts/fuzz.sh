#!/usr/bin/env bash
# Runs every libFuzzer target of a KVF_FUZZ build (fuzz/) for SECONDS each, one after another,
# on seeds from seed_gen plus the corpus kept from earlier runs. Fails if any target crashes.
# Usage: scripts/fuzz.sh BUILD_DIR SECONDS [MODELS_DIR]; FUZZ_TARGETS="a_fuzz b_fuzz" picks some.
set -uo pipefail

build=$1 seconds=$2 models=${3:-../shared/models}
dir=$build/fuzz
"$dir/seed_gen" "$dir/seeds" "$models" tests/fixtures || exit 1
targets=${FUZZ_TARGETS:-$(find "$dir" -maxdepth 1 -type f -executable -name '*_fuzz' -printf '%f\n' | sort)}

failed=()
for t in $targets; do
  corpus=$dir/corpus/$t
  mkdir -p "$corpus" "$dir/seeds/$t" "$dir/artifacts"
  case $t in
    gguf_fuzz|gguf_vocab_fuzz|model_gguf_fuzz) dict=fuzz/gguf.dict ;;
    model_safetensors_fuzz) dict=fuzz/hf_config.dict ;;
    *) dict=fuzz/${t%_fuzz}.dict ;;
  esac
  args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$dir/artifacts/$t-")
  [ -f "$dict" ] && args+=(-dict="$dict")
  log=$dir/$t.log
  start=$(date +%s)
  "$dir/$t" "${args[@]}" "$corpus" "$dir/seeds/$t" >"$log" 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+|exec/s: [0-9]+' | paste -sd' ')
  printf '%-22s %10s execs in %4ss  %-24s corpus %5s files  rc %d\n' "$t" "${execs:-?}" "$secs" "$last" \
    "$(find "$corpus" -type f | wc -l)" "$rc"
  if [ "$rc" -ne 0 ]; then
    failed+=("$t")
    tail -n 40 "$log"
  fi
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (logs and crash inputs under $dir)"
  exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a crash"
