#!/usr/bin/env python3
"""measure.py: run one replay (pando or irmin bench.exe) and measure it the
same way for both stores.

  measure.py --tool pando|irmin --store DIR --out PREFIX [--keep-csv] -- CMD...

The wrapper reads /proc/self/io before and after running CMD (Linux folds a
reaped child's I/O, and its reaped children's, into the parent), takes
RUSAGE_CHILDREN's ru_maxrss (the largest VmHWM among CMD and its reaped
descendants, e.g. irmin's GC workers), the wall time from exec to exit, and
the sum of st_size of the regular files under the store DIR after exit.
It then reads the tool's own outputs (pando: REPORT/report.json; irmin:
the --json summary and the per-block CSV), recomputes the block and commit
percentiles from the per-block data with the same nearest-rank rule for
both (pando's report.json keeps at most 2,000 thinned samples: where it
thinned them, scripts/side_by_side.py takes pando's own all-block figures), and writes
PREFIX.json (summary), PREFIX.out / PREFIX.err (the tool's
stdout/stderr) and, with --keep-csv, the per-block times (pando:
PREFIX.blocks.csv with block,block_s,commit_s; irmin: its own
PREFIX.irmin.csv).

For pando, CMD must include --report PREFIX.report (a directory);
for irmin, --json PREFIX.irmin.json --csv PREFIX.irmin.csv.
"""
import argparse, json, math, os, resource, shutil, subprocess, sys, time


def proc_io():
    d = {}
    with open("/proc/self/io") as f:
        for line in f:
            k, v = line.split(":")
            d[k.strip()] = int(v)
    return d


def dir_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for n in files:
            try:
                st = os.lstat(os.path.join(root, n))
            except FileNotFoundError:
                continue
            if os.path.isfile(os.path.join(root, n)) and not os.path.islink(os.path.join(root, n)):
                total += st.st_size
    return total


def pct(sorted_vals, p):
    n = len(sorted_vals)
    if n == 0:
        return None
    r = math.ceil(p / 100.0 * n)
    return sorted_vals[max(0, min(n - 1, r - 1))]


def stats(vals, prefix):
    s = sorted(vals)
    out = {}
    if not s:
        return out
    out[prefix + "mean_ms"] = 1000 * sum(s) / len(s)
    for p, k in ((50, "p50"), (90, "p90"), (99, "p99"), (99.9, "p999"), (100, "max")):
        out[prefix + k + "_ms"] = 1000 * pct(s, p)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True, choices=["pando", "irmin"])
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--keep-csv", action="store_true")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    io0 = proc_io()
    t0 = time.monotonic()
    with open(a.out + ".out", "w") as fo, open(a.out + ".err", "w") as fe:
        rc = subprocess.call(cmd, stdout=fo, stderr=fe)
    wall = time.monotonic() - t0
    io1 = proc_io()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    disk = dir_bytes(a.store)
    res = {
        "tool": a.tool,
        "cmd": " ".join(cmd),
        "rc": rc,
        "wall_s": wall,
        "children_maxrss_kb": ru.ru_maxrss,
        "children_cpu_user_s": ru.ru_utime,
        "children_cpu_sys_s": ru.ru_stime,
        "final_disk_bytes": disk,
    }
    for k in io1:
        res["io_" + k] = io1[k] - io0.get(k, 0)

    blocks_s, commit_s = [], []
    report = a.out + (".report/report.json" if a.tool == "pando" else ".irmin.json")
    if not os.path.exists(report):
        # The tool stopped before writing its report: its own words are in
        # OUT.err; the run is not measured.
        json.dump(res, open(a.out + ".json", "w"), indent=1)
        print("%s rc=%d: no report (%s); see %s.err" % (os.path.basename(a.out), rc, report, a.out),
              file=sys.stderr, flush=True)
        return rc or 1
    if a.tool == "pando":
        rep_dir = a.out + ".report"
        rep = json.load(open(os.path.join(rep_dir, "report.json")))
        samples = rep.get("samples", [])
        blocks_s = [x["wall_us"] / 1e6 for x in samples]
        commit_s = [x["commit_us"] / 1e6 for x in samples]
        res.update({
            "blocks": rep["blocks"],
            "samples": len(samples),
            "tool_total_s": rep["total_s"],
            "tool_blocks_per_s": rep["blocks_per_s"],
            "tool_block_ms": rep["block_ms"],
            "tool_commit_ms": rep["commit_ms"],
            "hash_mismatches": rep["checks"]["hash_mismatches"],
            "read_mismatches": rep["checks"]["read_mismatches"],
            "hashes_checked": rep["checks"]["hashes_checked"],
            "reads_checked": rep["checks"]["reads_checked"],
            "tool_peak_rss_bytes": rep["peak_rss_bytes"],
            "tool_final_pack_bytes": rep["final_pack_bytes"],
            "gc": rep.get("gc"),
        })
        # keep the summary, drop the bulky per-block samples and histograms
        slim = {k: v for k, v in rep.items() if k not in ("samples",)}
        slim["ops"] = [{k: v for k, v in o.items() if k != "buckets"} for o in rep.get("ops", [])]
        json.dump(slim, open(a.out + ".pando-report.json", "w"), indent=1)
        shutil.rmtree(rep_dir, ignore_errors=True)
    else:
        ij = json.load(open(a.out + ".irmin.json"))
        with open(a.out + ".irmin.csv") as f:
            hdr = f.readline().strip().split(",")
            ib, ic = hdr.index("block_s"), hdr.index("commit_s")
            for line in f:
                c = line.strip().split(",")
                blocks_s.append(float(c[ib]))
                commit_s.append(float(c[ic]))
        res.update({
            "blocks": ij["blocks"],
            "tool_total_s": ij["total_wall_s"],
            "tool_blocks_per_s": ij["blocks_per_s"],
            "hash_mismatches": ij["hash_mismatches"],
            "read_mismatches": ij["read_mismatches"],
            "tool_vmhwm_kb": ij["max_rss_vmhwm_kb"],
            "tool_final_disk_bytes": ij["final_disk_bytes"],
            "gcs_started": ij["gcs_started"],
            "gcs_finalised": ij["gcs_finalised"],
            "gcs_skipped": ij["gcs_skipped"],
        })
        if not a.keep_csv:
            os.remove(a.out + ".irmin.csv")
    res["blocks_per_s"] = res["blocks"] / wall
    res.update(stats(blocks_s, "block_"))
    res.update(stats(commit_s, "commit_"))
    if blocks_s:
        res["genesis_block_s"] = blocks_s[0]
        res["rest_blocks_sum_s"] = sum(blocks_s[1:])
        res.update(stats(blocks_s[1:], "rest_block_"))
        res["sum_blocks_s"] = sum(blocks_s)
    if a.keep_csv and a.tool == "pando":
        with open(a.out + ".blocks.csv", "w") as f:
            f.write("block,block_s,commit_s\n")
            for i, (b, c) in enumerate(zip(blocks_s, commit_s)):
                f.write("%d,%.6f,%.6f\n" % (i, b, c))
    json.dump(res, open(a.out + ".json", "w"), indent=1)
    print("%s rc=%d wall=%.2fs blocks=%d blocks/s=%.1f p50=%.2fms p99=%.2fms max=%.1fms disk=%d rss=%dkB wb=%d mism=%d/%d" % (
        os.path.basename(a.out), rc, wall, res["blocks"], res["blocks_per_s"],
        res.get("block_p50_ms", -1), res.get("block_p99_ms", -1), res.get("block_max_ms", -1),
        disk, ru.ru_maxrss, res.get("io_write_bytes", -1),
        res["hash_mismatches"], res["read_mismatches"]), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
