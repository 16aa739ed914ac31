#!/usr/bin/env python3
"""Where a replay's time goes, by operation and by what it spends it on.

Reads `perf script -F tid,ip,sym` output of a `perf record --call-graph
dwarf` of `pando replay`, keeps the busiest thread (the replay's), and
puts each sample under the outermost operation on its stack (commit, add,
mem, ...; "other" when none) and under the innermost activity (hashing,
writing records, loading records, copy-on-write, dropping, staging
values). Prints each operation's share of the samples and its split.

    perf record -F 499 --call-graph dwarf,65528 -o perf.data \\
        pando replay small-1.repr --sync never
    perf script -i perf.data -F tid,ip,sym > samples.txt
    python3 scripts/profile_by_operation.py samples.txt
"""

import collections
import sys

# Outermost frame that names an operation; mem_tree before mem.
OPERATIONS = [
    ("Store::commit", "commit"),
    ("Tree::mem_tree", "mem_tree"),
    ("Tree::mem", "mem"),
    ("Tree::find", "find"),
    ("Tree::add_mut", "add"),
    ("Tree::remove", "remove"),
    ("Store::checkout", "checkout"),
    ("TraceReader", "trace read"),
    ("Row::decode", "trace read"),
    ("RowRef", "trace read"),
    ("hdrhistogram", "timing"),
    ("clock_gettime", "timing"),
    ("ProcIo", "timing"),
]
# Innermost frame that names an activity.
ACTIVITIES = [
    ("load_inode_at", "load"),
    ("dir_hash", "hash"),
    ("inode_hash", "hash"),
    ("write_inode", "write"),
    ("write_child", "write"),
    ("drop_in_place", "drop"),
    ("make_mut", "copy-on-write"),
    ("stage", "stage"),
]


def samples(path):
    """(thread id, frames innermost first) of each sample."""
    current = None
    with open(path, errors="replace") as lines:
        for line in lines:
            if not line.strip():
                if current:
                    yield current
                current = None
            elif not line.startswith("\t"):
                current = (line.split()[0], [])
            elif current is not None:
                parts = line.strip().split(None, 1)
                if len(parts) > 1:
                    current[1].append(parts[1])
    if current:
        yield current


def first_match(frames, table):
    for frame in frames:
        for needle, name in table:
            if needle in frame:
                return name
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    all_samples = list(samples(sys.argv[1]))
    if not all_samples:
        sys.exit(f"{sys.argv[1]}: no samples")
    busiest = collections.Counter(tid for tid, _ in all_samples).most_common(1)[0][0]
    counts = collections.Counter()
    total = 0
    for tid, frames in all_samples:
        if tid != busiest:
            continue
        total += 1
        operation = first_match(reversed(frames), OPERATIONS) or "other"
        activity = first_match(frames, ACTIVITIES) or "rest"
        counts[(operation, activity)] += 1
    by_operation = collections.Counter()
    for (operation, _), n in counts.items():
        by_operation[operation] += n
    print(f"{total} samples of the replay's thread")
    for operation, n in by_operation.most_common():
        split = ", ".join(f"{a} {100 * m / total:.1f}" for (o, a), m in counts.most_common() if o == operation)
        print(f"{operation:11s} {100 * n / total:5.1f}%   {split}")


if __name__ == "__main__":
    main()
