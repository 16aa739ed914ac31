#!/usr/bin/env bash
# side-by-side.sh [--quick | --full]
# side-by-side.sh TRACE_NAME TRACE ROUNDS [pando replay args] [-- irmin bench args]
#
# Interleaved replays of the same trace files by pando and by irmin-pack
# 3.7.2 (its replay driver, bench/irmin/, at Octez's configuration, no
# fsync), and optionally by pando built from a base commit ($BASE_PANDO).
# Each round runs them in turn, so the machine's load falls on all alike;
# base and pando swap places every other round (ABBA), so that a drift of
# the machine's speed within a round falls on both.
# Every run is measured the same way by bench/irmin/measure.py (wall time,
# /proc I/O, peak RSS, store size, the tools' own per-block figures) into
# $RUNS/TRACE_NAME/{base,pando,irmin}-R.json; scripts/side_by_side.py
# prints medians and the medians of the within-round ratios.
#
# --full (the default without arguments) runs the README's rows, pando
# with --sync pipelined: irmin-diff-a 5 rounds, small 4, medium's first
# 5,000 blocks 3, small with a collection every 50 blocks keeping 100
# commits 3; then prints the tables. --quick runs irmin-diff-a and small's
# first 1,000 blocks, 1 round each: a check that everything works, not a
# measurement (under a minute once pando and irmin's driver are built).
# With TRACE_NAME TRACE ROUNDS it runs that one trace and prints nothing
# (side_by_side.py sums the runs up).
#
# Environment, all optional:
#   PANDO       pando (default: target/release/pando, built here)
#   BASE_PANDO  pando built at the base commit (default: no base column);
#               the suites give both --sync pipelined themselves
#   NO_IRMIN    set to 1: no irmin runs, only base against pando (two
#               builds compared: docs/PERFORMANCE.md's ABBA figures)
#   BENCH       irmin's bench.exe (default: built by bench/irmin/build.sh
#               into target/irmin-bench, irmin 3.7.2 as bench/irmin/README.md
#               says: an opam switch, IRMIN_SRC, or the tarball beside)
#   RUNS        the measurements (default target/side-by-side/runs; a
#               suite's go to RUNS/quick or RUNS/full, emptied first)
#   WORK        the traces and stores (default target/side-by-side/work)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

suite=
case "${1:-}" in
  --quick | --full) suite=${1#--}; shift ;;
  "") suite=full ;;
  -*) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
if [ -n "$suite" ] && [ $# -gt 0 ]; then
  echo "side-by-side.sh: --$suite takes no other argument" >&2; exit 2
fi
if [ -z "$suite" ] && [ $# -lt 3 ]; then
  echo "usage: side-by-side.sh [--quick | --full] | TRACE_NAME TRACE ROUNDS [pando args] [-- irmin args]" >&2; exit 2
fi

if [ -z "${BENCH:-}" ] && [ "${NO_IRMIN:-}" != 1 ]; then
  BENCH=$("$root/bench/irmin/build.sh" | tail -1)
fi
RUNS=${RUNS:-$root/target/side-by-side/runs}
WORK=${WORK:-$root/target/side-by-side/work}
mkdir -p "$RUNS" "$WORK"
if [ -z "${PANDO:-}" ]; then
  (cd "$root" && cargo build --release --locked -q -p pando-cli)
  PANDO=$root/target/release/pando
fi

pando_run() { # pando_run BINARY PREFIX TRACE ARGS...
  local bin=$1 prefix=$2 trace=$3; shift 3
  rm -rf "$WORK/store"; sync
  python3 "$root/bench/irmin/measure.py" --tool pando --store "$WORK/store" --out "$prefix" -- \
    "$bin" replay "$trace" --store "$WORK/store" --report "$prefix.report" "$@"
}
irmin_run() { # irmin_run PREFIX TRACE ARGS...
  local prefix=$1 trace=$2; shift 2
  rm -rf "$WORK/store"; sync
  python3 "$root/bench/irmin/measure.py" --tool irmin --store "$WORK/store" --out "$prefix" -- \
    "$BENCH" "$trace" "$WORK/store" --json "$prefix.irmin.json" --csv "$prefix.irmin.csv" "$@"
}

one_trace() { # one_trace NAME TRACE ROUNDS [pando args] [-- irmin args]
  local name=$1 trace=$2 rounds=$3 r arg side=p build bin
  shift 3
  local pando_args=() irmin_args=()
  for arg in "$@"; do
    if [ "$arg" = -- ]; then side=i; elif [ $side = p ]; then pando_args+=("$arg"); else irmin_args+=("$arg"); fi
  done
  local out=$RUNS/$name
  mkdir -p "$out"
  for r in $(seq 1 "$rounds"); do
    echo "side-by-side: $name, round $r of $rounds" >&2
    local builds=(pando)
    if [ -n "${BASE_PANDO:-}" ]; then
      if [ $((r % 2)) = 1 ]; then builds=(base pando); else builds=(pando base); fi
    fi
    for build in "${builds[@]}"; do
      if [ "$build" = base ]; then bin=$BASE_PANDO; else bin=$PANDO; fi
      pando_run "$bin" "$out/$build-$r" "$trace" ${pando_args[@]+"${pando_args[@]}"}
    done
    if [ "${NO_IRMIN:-}" != 1 ]; then
      irmin_run "$out/irmin-$r" "$trace" ${irmin_args[@]+"${irmin_args[@]}"}
    fi
  done
  rm -rf "$WORK/store"
}

if [ -z "$suite" ]; then
  one_trace "$@"
  exit 0
fi

# The suites' traces: irmin-diff-a as irmin wrote it, and pando gen's.
diffa=$WORK/irmin-diff-a.repr
if [ ! -s "$diffa" ]; then
  zstd -q -d -f "$root/tests/vectors/irmin-diff-a.repr.zst" -o "$diffa.part"
  mv "$diffa.part" "$diffa"
fi
gen() { # gen PRESET: the trace's path, generated once (seed 1); run in
  # $(...), where set -e does not reach, so each failure returns itself
  local t=$WORK/$1-1.repr
  if [ ! -s "$t" ]; then
    echo "side-by-side: pando gen --preset $1 --seed 1" >&2
    "$PANDO" gen --preset "$1" --seed 1 -o "$t.part" >&2 || return 1
    mv "$t.part" "$t" || return 1
  fi
  echo "$t"
}
rm -rf "${RUNS:?}/$suite"
RUNS=$RUNS/$suite
sync_=(--sync pipelined)
small=$(gen small)
if [ "$suite" = quick ]; then
  one_trace irmin-diff-a "$diffa" 1 "${sync_[@]}"
  one_trace small-1000 "$small" 1 "${sync_[@]}" --blocks 1000 -- --max-blocks 1000
else
  medium=$(gen medium)
  one_trace irmin-diff-a "$diffa" 5 "${sync_[@]}"
  one_trace small "$small" 4 "${sync_[@]}"
  one_trace medium-5000 "$medium" 3 "${sync_[@]}" --blocks 5000 -- --max-blocks 5000
  one_trace small-gc "$small" 3 "${sync_[@]}" --keep-last 100 --gc-every 50 -- --gc-every 50 --gc-keep 100
fi
python3 "$here/side_by_side.py" "$RUNS"
