#!/usr/bin/env bash
# abba.sh [--rounds N] [--out DIR] TRACE NAME=PANDO NAME=PANDO... [-- REPLAY OPTIONS]
#
# The ABBA rounds docs/PERFORMANCE.md quotes: each round replays TRACE
# once with each pando binary (`pando replay --sync pipelined`, under
# bench/irmin/measure.py, in a fresh store), in the order given on odd
# rounds and reversed on even ones, so that a drift of the machine's
# speed within a round falls on both sides. Options after `--` go to
# every replay (for example `--blocks 2000`).
#
# Prints each replay's blocks/s as it ends, then per binary the median
# blocks/s and peak RSS, and for each binary after the first the median
# and range of its within-round ratio to the first. Rounds default to 6;
# the runs stay in DIR (default target/abba). Run it on a quiet machine:
# a build beside it moves the figures more than most changes do.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=6 out=target/abba
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] || { sed -n '2,3p' "$0" >&2; exit 2; }
trace=$1; shift
names=() bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    *=*) names+=("${1%%=*}"); bins+=("${1#*=}") ;;
    *) echo "abba.sh: $1 is not NAME=PANDO" >&2; exit 2 ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift
[ -f "$trace" ] || { echo "abba.sh: no trace at $trace" >&2; exit 2; }
for bin in "${bins[@]}"; do
  [ -x "$bin" ] || { echo "abba.sh: $bin is not an executable" >&2; exit 2; }
done

case "$out" in
  "" | / | . | ..) echo "abba.sh: --out $out would remove too much" >&2; exit 2 ;;
esac
rm -rf "$out" && mkdir -p "$out"
order=$(seq 0 $((${#names[@]} - 1)))
for round in $(seq 1 "$rounds"); do
  for i in $order; do
    name=${names[$i]} store="$out/store"
    rm -rf "$store"
    python3 bench/irmin/measure.py --tool pando --store "$store" --out "$out/$name-$round" -- \
      "${bins[$i]}" replay "$trace" --store "$store" --sync pipelined --report "$out/$name-$round.report" "$@" \
      >/dev/null
    python3 -c "import json,sys; print(sys.argv[1], sys.argv[2], round(json.load(open(sys.argv[3]))['blocks_per_s'], 1))" \
      "$name" "$round" "$out/$name-$round.json"
  done
  order=$(echo "$order" | tac)
done
rm -rf "$out/store"

python3 - "$out" "$rounds" "${names[@]}" <<'PY'
import json, statistics, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {n: [json.load(open(f"{out}/{n}-{r}.json")) for r in range(1, rounds + 1)] for n in names}
speed = {n: [run["blocks_per_s"] for run in runs[n]] for n in names}
for n in names:
    rss = statistics.median(run["tool_peak_rss_bytes"] for run in runs[n]) / 1e6
    print(f"{n}: {statistics.median(speed[n]):.1f} blocks/s (median of {rounds}), peak RSS {rss:.0f} MB")
first = names[0]
for n in names[1:]:
    ratios = [b / a for a, b in zip(speed[first], speed[n])]
    print(f"{n} / {first}: {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")
PY
