#!/usr/bin/env bash
# gc-busy.sh PANDO TRACE [ROUNDS] [BUSY]: the writer's longest pause by a
# collection on a busy machine (issue 40: at most 10 ms).
#
# Replays TRACE with PANDO (a `pando` binary) ROUNDS times (default 3),
# collecting every 50 blocks and keeping the last 100, while BUSY
# CPU-bound processes (default: one per core) run beside it at the same
# priority, and prints for each run the collections, their longest writer
# pause (the longest the collection held the writer lock: its start, its
# switch or a relocation step), the longest block and the wall time.
# A benchmark, not a test: its figures depend on the machine.
set -euo pipefail
pando=${1:?pando binary}
trace=${2:?trace file}
rounds=${3:-3}
busy=${4:-$(nproc)}
work=$(mktemp -d)
hogs=()
stop() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop EXIT
for _ in $(seq 1 "$busy"); do
  sh -c 'while :; do :; done' &
  hogs+=($!)
done
echo "$busy busy processes beside the replay"
for r in $(seq 1 "$rounds"); do
  rm -rf "$work/store" "$work/report"
  "$pando" replay "$trace" --store "$work/store" --report "$work/report" --sync pipelined \
    --keep-last 100 --gc-every 50 >/dev/null
  python3 - "$work/report/report.json" "$r" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
gc = report.get("gc", [])
pause = max((g["max_pause_ms"] for g in gc), default=0.0)
switch = max((g.get("switch_pause_ms", 0.0) for g in gc), default=0.0)
step = max((g.get("step_pause_ms", 0.0) for g in gc), default=0.0)
longest = max((g["seconds"] for g in gc), default=0.0)
print(f"run {sys.argv[2]}: {len(gc)} collections (longest {longest:.1f} s), "
      f"longest writer pause {pause:.2f} ms (switch {switch:.2f}, step {step:.2f}), "
      f"worst block {report['worst_block_ms']:.1f} ms, p99 block {report['block_ms'].get('p99', 0):.2f} ms, "
      f"{report['blocks']} blocks in {report['total_s']:.1f} s")
pauses = sorted(g["max_pause_ms"] for g in gc)
if pauses:
    print("  pauses ms: " + " ".join(f"{p:.1f}" for p in pauses))
PY
done
