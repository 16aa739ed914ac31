#!/usr/bin/env bash
# side-by-side.sh TRACE_NAME TRACE ROUNDS [pando replay args] [-- irmin bench args]
#
# Interleaved replays of one trace by three stores, for a change to the
# engine: pando built from the base commit ($BASE_PANDO), pando with the
# change ($PANDO), and irmin-pack 3.7.2 ($BENCH, ../shared/irmin-bench's
# driver at Octez's configuration, no fsync). Each round runs the three in
# turn, so the machine's load falls on all of them alike. Every run is
# measured the same way by ../shared/irmin-bench/measure.py (wall time,
# /proc I/O, peak RSS, store size, the tools' own per-block figures) into
# $RUNS/TRACE_NAME/{base,pando,irmin}-R.json; scripts/side_by_side.py
# prints medians and per-round ratios.
#
# Environment: PANDO, BASE_PANDO, BENCH, RUNS (results), WORK (stores,
# wiped per run), SHARED (default ../shared beside the checkout).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PANDO:?}" "${BASE_PANDO:?}" "${BENCH:?}" "${RUNS:?}" "${WORK:?}"
shared=${SHARED:-$here/../../shared}
name=${1:?trace name}
trace=${2:?trace file}
rounds=${3:?rounds}
shift 3
pando_args=() irmin_args=() side=p
for arg in "$@"; do
  if [ "$arg" = -- ]; then side=i; elif [ $side = p ]; then pando_args+=("$arg"); else irmin_args+=("$arg"); fi
done
out=$RUNS/$name
mkdir -p "$out" "$WORK"

pando_run() { # pando_run BINARY PREFIX
  rm -rf "$WORK/store"; sync
  python3 "$shared/irmin-bench/measure.py" --tool pando --store "$WORK/store" --out "$2" -- \
    "$1" replay "$trace" --store "$WORK/store" --report "$2.report" "${pando_args[@]}"
}
irmin_run() { # irmin_run PREFIX
  rm -rf "$WORK/store"; sync
  python3 "$shared/irmin-bench/measure.py" --tool irmin --store "$WORK/store" --out "$1" -- \
    "$BENCH" "$trace" "$WORK/store" --json "$1.irmin.json" --csv "$1.irmin.csv" "${irmin_args[@]}"
}

for r in $(seq 1 "$rounds"); do
  pando_run "$BASE_PANDO" "$out/base-$r"
  pando_run "$PANDO" "$out/pando-$r"
  irmin_run "$out/irmin-$r"
done
rm -rf "$WORK/store"
