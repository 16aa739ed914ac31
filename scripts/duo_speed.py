#!/usr/bin/env python3
"""duo_speed.py --duo DUO_EXE --pando PANDO_EXE --work DIR --rounds R
                [--name NAME] [--max-blocks N] [--sync POLICY] TRACE

The same trace replayed, interleaved, by three runs per round, each
measured the same way (wall time from exec to exit, and the peak RSS of
the process, RUSAGE_CHILDREN's ru_maxrss taken around that one run alone
as bench/irmin/measure.py does):
  ocaml  the duo alone on pando, through the OCaml binding's Pando_context
         (duo --only pando)
  raw    the same through Pando's TezEdge-shaped functions (--api raw)
  null   the duo with no store (--only null): reading the trace alone
  (raw and null only when --configs names them)
  irmin  the duo alone on irmin-pack 3.7.2 (duo --only irmin)
  native pando's own replay (pando replay TRACE --store ...)
Pando runs with one sync policy through OCaml and natively (--sync,
default pipelined as in the side-by-side; irmin never syncs).
Blocks/s is blocks / wall. Writes DIR/NAME/RUN-R.json per run and prints
the medians [min-max] and the medians of the within-round ratios.
"""
import argparse, json, os, resource, shutil, statistics, subprocess, sys, time


def run(cmd, out, store):
    shutil.rmtree(store, ignore_errors=True)
    subprocess.call(["sync"])
    # a fresh interpreter child measures one run's own RUSAGE_CHILDREN
    probe = (
        "import resource,subprocess,sys,time,json\n"
        "t0=time.monotonic()\n"
        "rc=subprocess.call(sys.argv[2:],stdout=open(sys.argv[1]+'.out','w'),"
        "stderr=open(sys.argv[1]+'.err','w'))\n"
        "w=time.monotonic()-t0\n"
        "ru=resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "json.dump({'rc':rc,'wall_s':w,'maxrss_kb':ru.ru_maxrss,"
        "'cpu_s':ru.ru_utime+ru.ru_stime},open(sys.argv[1]+'.json','w'))\n"
    )
    subprocess.check_call([sys.executable, "-c", probe, out] + cmd)
    res = json.load(open(out + ".json"))
    res["cmd"] = " ".join(cmd)
    text = open(out + ".out").read()
    blocks = None
    for line in text.splitlines():
        if line.startswith("duo: "):
            blocks = int(line.split()[1])
    if blocks is None:  # pando replay: its report
        try:
            blocks = json.load(open(out + ".report/report.json"))["blocks"]
        except (OSError, KeyError, ValueError):
            blocks = 0
        shutil.rmtree(out + ".report", ignore_errors=True)
    res["blocks"] = blocks
    res["blocks_per_s"] = blocks / res["wall_s"] if res["wall_s"] > 0 else 0
    json.dump(res, open(out + ".json", "w"), indent=1)
    shutil.rmtree(store, ignore_errors=True)
    print("%s rc=%d blocks=%d wall=%.1fs blocks/s=%.1f rss=%.0fMB"
          % (os.path.basename(out), res["rc"], blocks, res["wall_s"],
             res["blocks_per_s"], res["maxrss_kb"] / 1024), flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duo", required=True)
    ap.add_argument("--pando", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--name", default=None)
    ap.add_argument("--max-blocks", type=int, default=None)
    ap.add_argument("--sync", default="pipelined", choices=["every", "pipelined", "never"],
                    help="pando's sync policy, through OCaml and native alike "
                    "(default pipelined, as the side-by-side's pando rows; "
                    "irmin never syncs)")
    ap.add_argument("--configs", default="ocaml,irmin,native")
    ap.add_argument("trace")
    a = ap.parse_args()
    name = a.name or os.path.splitext(os.path.basename(a.trace))[0]
    out = os.path.join(a.work, name)
    os.makedirs(out, exist_ok=True)
    store = os.path.join(a.work, "store")
    mb = ["--max-blocks", str(a.max_blocks)] if a.max_blocks else []
    cmds = {
        "ocaml": [a.duo, a.trace, "--only", "pando", "--sync", a.sync, "--dir", store] + mb,
        "raw": [a.duo, a.trace, "--only", "pando", "--api", "raw", "--sync", a.sync, "--dir", store] + mb,
        "irmin": [a.duo, a.trace, "--only", "irmin", "--dir", store] + mb,
        "null": [a.duo, a.trace, "--only", "null", "--dir", store] + mb,
        "native": [a.pando, "replay", a.trace, "--store", store, "--sync", a.sync]
        + (["--blocks", str(a.max_blocks)] if a.max_blocks else []),
    }
    configs = a.configs.split(",")
    runs = {c: [] for c in configs}
    for r in range(1, a.rounds + 1):
        for c in configs:
            cmd = list(cmds[c])
            if c == "native":
                cmd += ["--report", os.path.join(out, "%s-%d.report" % (c, r))]
            runs[c].append(run(cmd, os.path.join(out, "%s-%d" % (c, r)), store))

    def med(c, k, scale=1):
        v = [x[k] * scale for x in runs[c]]
        return "%.1f [%.1f-%.1f]" % (statistics.median(v), min(v), max(v))

    print()
    print("%s, %d rounds (median [min-max])" % (name, a.rounds))
    print()
    print("| run | blocks | blocks/s | wall (s) | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    for c in configs:
        print("| %s | %d | %s | %s | %s |" % (
            c, runs[c][0]["blocks"], med(c, "blocks_per_s"), med(c, "wall_s"),
            med(c, "maxrss_kb", 1 / 1024)))
    print()

    def ratio(x, y, k):
        if x not in runs or y not in runs:
            return
        v = [a_[k] / b_[k] for a_, b_ in zip(runs[x], runs[y]) if b_[k]]
        if v:
            print("%s / %s %s: median %.2f [%.2f-%.2f]" % (
                x, y, k, statistics.median(v), min(v), max(v)))

    ratio("ocaml", "native", "blocks_per_s")
    ratio("raw", "native", "blocks_per_s")
    ratio("ocaml", "irmin", "blocks_per_s")
    ratio("native", "irmin", "blocks_per_s")
    ratio("ocaml", "native", "maxrss_kb")
    bad = [x for c in configs for x in runs[c] if x["rc"] != 0]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
