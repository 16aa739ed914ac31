#!/usr/bin/env python3
"""assertion_cost.py [--blocks N] [--top K] TRACE: what each `debug_assert!` costs.

Runs the first N blocks of TRACE (600 by default) under callgrind twice,
`target/release/pando` and `target/release-asserts/pando` (build both
first: `cargo build --release -p pando-cli` and `cargo build --profile
release-asserts -p pando-cli`), both `--sync never`. Instruction counts
are deterministic, so the differences are not the machine's noise.

Prints:
- the instructions each build ran, and the difference;
- each `debug_assert!` (and `_eq`, `_ne`) of pando's crates that ran,
  with the instructions on its lines in the asserting build (a release
  build has no code there), as a share of the release build's total,
  largest first (the K largest; 25 by default).

What the lines do not show: code a condition calls that the compiler
inlined (it is counted on the callee's lines), core's own precondition
checks compiled into pando's code with the flag on, and inlining that
changed with the larger functions. The difference between the totals
less the assertions' lines is that share. Wall time is another
measurement (docs/PERFORMANCE.md): ABBA rounds of the two builds.
"""

import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSERT = re.compile(r"\bdebug_assert(?:_eq|_ne)?!\(")


def run(binary, trace, blocks, out_dir):
    """Runs the replay under callgrind; returns the profile's path and total."""
    profile = out_dir / f"{binary.parent.name}.callgrind"
    cmd = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}",
        str(binary), "replay", str(trace), "--blocks", str(blocks), "--sync", "never",
        "--report", str(out_dir / f"report-{binary.parent.name}"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"assertion_cost: {' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    total = re.search(r"Collected : (\d+)", done.stderr)
    if not total:
        sys.exit("assertion_cost: callgrind reported no total")
    return profile, int(total.group(1))


def annotated_lines(profile):
    """(file, count, text) for each line of pando's source files."""
    text = subprocess.run(
        ["callgrind_annotate", "--auto=yes", "--threshold=100", "--context=1000000", str(profile)],
        capture_output=True, text=True, check=True,
    ).stdout
    lines, current = [], None
    for line in text.split("\n"):
        header = re.match(r"-- Auto-annotated source: (.*)", line)
        if header:
            current = header.group(1).strip()
            continue
        # Named from the root, or relative to it (callgrind_annotate shortens).
        if current and re.search(r"(^|/)crates/pando-", current):
            row = re.match(r"\s*([0-9,]+|\.)\s*(?:\([ 0-9.]+%\))?\s?(.*)$", line)
            if row:
                count = 0 if row.group(1) == "." else int(row.group(1).replace(",", ""))
                lines.append((current, count, row.group(2)))
    return lines


def assertions(lines):
    """(instructions, file, text) for each debug assertion: its lines up
    to the closing parenthesis."""
    found, i = [], 0
    while i < len(lines):
        path, _, text = lines[i]
        if not ASSERT.search(text) or text.strip().startswith("//"):
            i += 1
            continue
        depth, cost, parts, j = 0, 0, [], i
        while j < len(lines) and lines[j][0] == path:
            cost += lines[j][1]
            parts.append(lines[j][2].strip())
            depth += lines[j][2].count("(") - lines[j][2].count(")")
            if depth <= 0:
                break
            j += 1
        found.append((cost, path, " ".join(parts)))
        i = j + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--blocks", type=int, default=600)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    builds = [ROOT / "target" / name / "pando" for name in ("release", "release-asserts")]
    for binary in builds:
        if not binary.exists():
            sys.exit(f"assertion_cost: {binary} is missing (see the usage)")
    with tempfile.TemporaryDirectory(prefix="pando-assertion-cost-") as tmp:
        out = pathlib.Path(tmp)
        (_, plain), (profile, checked) = (run(b, args.trace, args.blocks, out) for b in builds)
        found = sorted(assertions(annotated_lines(profile)), reverse=True)
    on_lines = sum(cost for cost, _, _ in found)
    print(f"instructions, {args.blocks} blocks: release {plain:,}, release-asserts {checked:,} "
          f"(+{100 * (checked - plain) / plain:.2f}%)")
    print(f"on the lines of the {len(found)} debug assertions that ran: {on_lines:,} "
          f"({100 * on_lines / plain:.3f}%); the rest of the difference is the flag's other effects")
    for cost, path, text in found[: args.top]:
        where = re.sub(r"^.*?crates/", "", path)
        print(f"{100 * cost / plain:7.3f}%  {cost:>12,}  {where}: {text[:110]}")


if __name__ == "__main__":
    main()
