#!/usr/bin/env python3
"""side_by_side.py RUNS_DIR: one markdown table per trace from the runs of
scripts/side-by-side.sh.

For each trace directory: the median [min-max] over rounds of blocks/s,
block p50 and p99, commit p50, the first block's time, final disk and
peak RSS for base, pando and irmin; then
the medians over rounds of the ratios taken within each round (pando /
irmin, base / irmin, pando / base), so that a round's load cancels out.
Without base runs (no BASE_PANDO), or irmin's (NO_IRMIN=1), their
columns and ratios are left out.
"""
import glob, json, os, re, statistics, sys

CONFIGS = ["base", "pando", "irmin"]
METRICS = [
    ("blocks_per_s", "blocks/s", "%.1f"),
    ("block_p50_ms", "block p50 (ms)", "%.2f"),
    ("block_p99_ms", "block p99 (ms)", "%.2f"),
    ("commit_p50_ms", "commit p50 (ms)", "%.2f"),
    # The trace's first block: `medium`'s genesis, 1.9 M writes in one commit.
    ("genesis_block_s", "first block (s)", "%.2f"),
    ("final_disk_bytes", "final disk (MB)", "%.1f"),
    ("children_maxrss_kb", "peak RSS (MB)", "%.0f"),
    ("hash_mismatches", "commit-hash mismatches", "%d"),
    ("read_mismatches", "read mismatches", "%d"),
]
SCALE = {"final_disk_bytes": 1e-6, "children_maxrss_kb": 1e-3}
# pando's report keeps thinned per-block samples on long runs: its own
# all-block histogram figures are then the ones to use.
PANDO_OWN = {"block_p50_ms": ("tool_block_ms", "p50"), "block_p99_ms": ("tool_block_ms", "p99"),
             "commit_p50_ms": ("tool_commit_ms", "p50")}


def value(run, key):
    if key in PANDO_OWN and run.get("tool") == "pando" and run.get("samples", run["blocks"]) < run["blocks"]:
        outer, inner = PANDO_OWN[key]
        return run[outer][inner]
    v = run.get(key)
    return None if v is None else v * SCALE.get(key, 1)


def load(directory):
    runs = {c: {} for c in CONFIGS}
    for path in glob.glob(os.path.join(directory, "*.json")):
        m = re.match(r"^(base|pando|irmin)-(\d+)\.json$", os.path.basename(path))
        if m:
            runs[m.group(1)][int(m.group(2))] = json.load(open(path))
    return runs


def spread(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{fmt % statistics.median(values)} [{fmt % min(values)}-{fmt % max(values)}]"


def main(root):
    for directory in sorted(d for d in glob.glob(os.path.join(root, "*")) if os.path.isdir(d)):
        runs = load(directory)
        # base and irmin are optional (no BASE_PANDO, NO_IRMIN=1), not both
        configs = [c for c in CONFIGS if runs[c]]
        if "pando" not in configs or len(configs) < 2:
            continue
        rounds = sorted(set.intersection(*(set(runs[c]) for c in configs)))
        if not rounds:
            continue
        pairs_of = [p for p in [("pando", "irmin"), ("base", "irmin"), ("pando", "base")] if set(p) <= set(configs)]
        print(f"### {os.path.basename(directory)} ({len(rounds)} rounds)\n")
        print("| metric | " + " | ".join(configs) + " | " + " | ".join(f"{a} / {b}" for a, b in pairs_of) + " |")
        print("|---|" + "---:|" * (len(configs) + len(pairs_of)))
        for key, label, fmt in METRICS:
            cells = [spread([value(runs[c][r], key) for r in rounds], fmt) for c in configs]
            ratios = []
            for a, b in pairs_of:
                pairs = [(value(runs[a][r], key), value(runs[b][r], key)) for r in rounds]
                pairs = [x / y for x, y in pairs if x is not None and y]
                ratios.append(spread(pairs, "%.2f") if pairs else "-")
            print(f"| {label} | " + " | ".join(cells + ratios) + " |")
        print()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs")
