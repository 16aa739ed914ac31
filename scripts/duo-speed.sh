#!/usr/bin/env bash
# duo-speed.sh TRACE [ROUNDS] [--max-blocks N] [duo_speed.py options]
#
# Speed through the OCaml binding: the same trace replayed by pando
# through OCaml (the duo alone on pando, Pando_context), by irmin-pack
# 3.7.2 (the duo alone on irmin) and by native `pando replay`,
# interleaved round by round so that the machine's load falls on all
# three alike; prints medians and within-round ratios
# (scripts/duo_speed.py). Pando runs pipelined through OCaml and natively
# unless --sync says otherwise (irmin never syncs). Builds the duo (scripts/duo.sh --build-only,
# irmin 3.7.2 found as there) and pando-cli (cargo build --release; or set
# PANDO to a pando binary) first.
# Results go to $RUNS (default target/duo/speed). Runs under nice.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
trace=${1:?usage: duo-speed.sh TRACE [ROUNDS] [--max-blocks N]}
shift
rounds=3
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
duo=$("$here/duo.sh" --build-only | tail -1)
if [ -z "${PANDO:-}" ]; then
  (cd "$root" && cargo build --release -q -p pando-cli)
fi
pando=${PANDO:-$root/target/release/pando}
runs=${RUNS:-$root/target/duo/speed}
mkdir -p "$runs"
exec nice python3 "$here/duo_speed.py" --duo "$duo" --pando "$pando" \
  --work "$runs" --rounds "$rounds" "$@" "$trace"
