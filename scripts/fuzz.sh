#!/usr/bin/env bash
# Fuzzes every decoder: builds the fuzz targets of fuzz/ (cargo-fuzz, the
# nightly toolchain) and runs each for SECONDS_PER_TARGET seconds (30 by
# default) from its committed seeds, two at a time (FUZZ_JOBS=N for
# another number). Exits non-zero if any target found a crash, a leak, a
# timeout (an input taking over 20 s: a loop) or an allocation over 1 GiB,
# after printing each reproducer's path and the command that replays it.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# The seeds are copied to a scratch corpus first, so what a run finds
# never changes the checkout; reproducers go to fuzz/artifacts/TARGET/
# (ignored by git). Each target's last line gives its runs and runs per
# second.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds=${1:-30}
shift || true
case $seconds in
  '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2; exit 2 ;;
esac
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^pando-fuzz$')
fi
jobs=${FUZZ_JOBS:-2}

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
  exit 1
fi
# One build of every target (cargo-fuzz builds them all when none is named).
if [ "$#" -eq 0 ]; then
  cargo +nightly fuzz build
else
  for target in "${targets[@]}"; do cargo +nightly fuzz build "$target"; done
fi
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin=target/$host/release

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# run TARGET: its seeds into a scratch corpus, then libFuzzer for the time
# given; its log in $scratch/TARGET.log.
run() {
  local target=$1 corpus=$scratch/$1
  mkdir -p "$corpus" "artifacts/$target"
  cp "corpus/$target"/* "$corpus/"
  "$bin/$target" "$corpus" -max_total_time="$seconds" -max_len=65536 -timeout=20 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="artifacts/$target/" >"$scratch/$target.log" 2>&1
}

failed=()
declare -A pids=()
report() {
  local target=$1 status=$2 log=$scratch/$1.log runs time
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  time=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  if [ "$status" -eq 0 ]; then
    printf 'fuzz %-14s ok: %s runs in %s s (%s runs/s)\n' "$target" "${runs:-?}" "${time:-?}" \
      "$(( ${runs:-0} / (${time:-0} > 0 ? ${time:-1} : 1) ))"
  else
    failed+=("$target")
    echo "fuzz $target FAILED (exit $status); the end of its log:"
    tail -n 40 "$log"
    local artifact
    for artifact in $(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log"); do
      echo "reproducer: fuzz/$artifact"
      echo "replay it:  (cd fuzz && cargo +nightly fuzz run $target $artifact)"
    done
  fi
}

# wait_one: waits for a running target to end and reports it.
wait_one() {
  local pid status=0
  wait -n -p pid "${!pids[@]}" || status=$?
  report "${pids[$pid]}" "$status"
  unset "pids[$pid]"
}

for target in "${targets[@]}"; do
  if [ ! -d "corpus/$target" ]; then
    echo "fuzz: no target $target (no fuzz/corpus/$target/)" >&2
    exit 2
  fi
  while [ "${#pids[@]}" -ge "$jobs" ]; do
    wait_one
  done
  run "$target" &
  pids[$!]=$target
done
while [ "${#pids[@]}" -gt 0 ]; do
  wait_one
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, no crash"
