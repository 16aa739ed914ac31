#!/usr/bin/env python3
"""Makes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from
real files: a store pando wrote replaying `pando gen --preset tiny` (once
plainly, once collected every 30 commits keeping 20), a snapshot of its
first commit, the traces `pando gen` and irmin 3.7.2 wrote, and irmin
3.7.2's stores of tests/vectors/. Each seed is cut small (a few KiB): the
fuzzers mutate faster, and the corpora stay under half a megabyte.

Usage, from the repository's root:
    cargo build --release -p pando-cli
    fuzz/make_seeds.py target/release/pando

Needs python3, zstd and tar. The seeds it writes replace those of the
targets it makes; the inputs of past findings (named `finding-*`) stay.
"""

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def leb(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_leb(data, pos):
    value, shift = 0, 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def u64le(n):
    return n.to_bytes(8, "little")


class Seeds:
    def __init__(self, target):
        self.dir = os.path.join(CORPUS, target)
        os.makedirs(self.dir, exist_ok=True)
        for name in os.listdir(self.dir):
            if not name.startswith("finding-"):
                os.remove(os.path.join(self.dir, name))

    def put(self, name, data):
        with open(os.path.join(self.dir, name), "wb") as f:
            f.write(data)


def run(*args, **kw):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, **kw)


def pack_records(path):
    """(kind, payload, framed bytes) of every record of a pack chunk."""
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        kind = data[pos]
        length, body = read_leb(data, pos + 1)
        end = body + length + 4
        yield kind, data[body : body + length], data[pos:end]
        pos = end


def store_seeds(work, pando):
    trace = os.path.join(work, "tiny.repr")
    run(pando, "gen", "--preset", "tiny", "-o", trace)
    plain, gced = os.path.join(work, "plain"), os.path.join(work, "gced")
    run(pando, "replay", trace, "-s", plain)
    run(pando, "replay", trace, "-s", gced, "--keep-last", "20", "--gc-every", "30")

    # Records: for each kind, a small, a middling and a larger one (at most
    # 4 KiB), framed and as their kind and payload alone.
    seeds = Seeds("store_record")
    by_kind = {}
    for kind, payload, framed in pack_records(os.path.join(plain, "chunk-0000000000000000.pack")):
        if len(payload) <= 4096:
            by_kind.setdefault(kind, []).append((payload, framed))
    names = {1: "values", 2: "tree", 3: "blob", 4: "commit", 5: "dict", 6: "patch", 7: "vpatch"}
    for kind, records in sorted(by_kind.items()):
        records.sort(key=lambda r: len(r[0]))
        for i, at in enumerate(sorted({0, len(records) // 2, len(records) - 1})):
            payload, framed = records[at]
            seeds.put(f"{names[kind]}-{i}-framed", framed)
            seeds.put(f"{names[kind]}-{i}-payload", bytes([kind]) + payload)

    seeds = Seeds("store_control")
    for store in (plain, gced):
        seeds.put(os.path.basename(store), open(os.path.join(store, "control"), "rb").read())

    # A mapping below no boundary (8 bytes of 0xff), as written (version 4)
    # and as version 3 wrote the same runs.
    seeds = Seeds("store_mapping")
    (mapping,) = [n for n in os.listdir(gced) if n.startswith("mapping-")]
    data = open(os.path.join(gced, mapping), "rb").read()
    seeds.put("gced-v4", b"\xff" * 8 + data)
    seeds.put("gced-v3", b"\xff" * 8 + mapping_v3(data, 100))

    seeds = Seeds("store_dict")
    seeds.put("plain", open(os.path.join(plain, "dict"), "rb").read())

    # The index after 8 bytes of durable end (the pack's length), and a
    # branches file.
    seeds = Seeds("store_index")
    index = open(os.path.join(plain, "index"), "rb").read()
    pack_len = os.path.getsize(os.path.join(plain, "chunk-0000000000000000.pack"))
    seeds.put("plain-index", u64le(pack_len) + index[: 44 * 40])
    branches = b"PANDOBR1" + (2).to_bytes(4, "little")
    for name, at in ((b"head", 0), (b"main", 44)):
        branches += leb(len(name)) + name + index[at : at + 32]
    seeds.put("branches", branches + crc32c(branches).to_bytes(4, "little"))

    # The snapshot of the first commit: the start of its raw stream (the
    # frames decompressed), and a whole small file of a hand-made stream.
    seeds = Seeds("snapshot")
    first = subprocess.run(
        [pando, "log", "-s", plain, "-n", "1000"], check=True, capture_output=True, text=True
    ).stdout
    commits = [line.split()[1] for line in first.splitlines() if line.startswith("commit ")]
    snap = os.path.join(work, "first.snap")
    run(pando, "snapshot", "export", "-s", plain, "-c", commits[-1], snap)
    seeds.put("first-commit-stream-start", snapshot_stream(work, snap)[:16384])
    seeds.put("hand-made-stream", small_stream())

    # Traces: the start of pando's own, ended by a commit row.
    seeds = Seeds("trace")
    seeds.put("tiny-start", trace_start(open(trace, "rb").read(), 16384))


def mapping_v3(data, most):
    """The first `most` runs of a version 4 mapping, as version 3 wrote them."""
    count = int.from_bytes(data[12:20], "little")
    at, end, file, ends, runs = 20, 0, None, {}, []
    for _ in range(count):
        gap, at = read_leb(data, at)
        length, at = read_leb(data, at)
        if data[at] == 1:
            file = int.from_bytes(data[at + 1 : at + 9], "little")
            at += 9
        else:
            at += 1
        skip, at = read_leb(data, at)
        skip = (skip >> 1) ^ -(skip & 1)
        old = end + gap
        new = ends.get(file, 0) + skip
        runs.append((old, new, length, file))
        ends[file] = new + length
        end = old + length
    runs = runs[:most]
    out = b"PANDOMAP" + (3).to_bytes(4, "little") + u64le(len(runs))
    for run_ in runs:
        out += b"".join(u64le(x) for x in run_)
    return out + crc32c(out).to_bytes(4, "little")


def snapshot_stream(work, path):
    """The raw stream of a snapshot file: its frames decompressed."""
    data = open(path, "rb").read()
    assert data[:8] == b"PANDOSN1"
    pos, out = 8, b""
    while pos < len(data):
        stored = int.from_bytes(data[pos + 4 : pos + 8], "little")
        frame = os.path.join(work, "frame.zst")
        with open(frame, "wb") as f:
            f.write(data[pos + 8 : pos + 8 + stored])
        out += subprocess.run(["zstd", "-dc", frame], check=True, capture_output=True).stdout
        pos += 8 + stored + 4
    return out


def small_stream():
    """A stream of a commit whose tree is one directory of two values and
    a subdirectory (its commit hash made up: it does not import)."""
    header = bytes(32) + leb(0) + (1600000000).to_bytes(8, "little") + leb(5) + b"Tezos" + leb(7) + b"block 0"
    sub = b"\x01" + leb(1) + leb(1) + b"x" + b"\x00" + leb(2) + b"42"
    root = b"\x01" + leb(3)
    root += leb(1) + b"a" + b"\x00" + leb(3) + b"one"
    root += leb(1) + b"b" + b"\x01" + sub
    root += leb(1) + b"c" + b"\x00" + leb(0)
    return header + root + b"E"


def trace_start(data, limit):
    """The header of a trace, its rows in the first `limit` bytes, and the
    first commit row after them (so that the seed ends a block)."""
    pos, rows = 13, []
    while pos < len(data):
        length, body = read_leb(data, pos)
        tag, _ = read_leb(data, body)
        rows.append((pos, body + length, tag))
        pos = body + length
        if pos > limit and tag == 7:
            break
    kept = [data[a:b] for a, b, tag in rows if b <= limit]
    commit = [data[a:b] for a, b, tag in rows if tag == 7][-1]
    return data[:13] + b"".join(kept) + commit


def irmin_seeds(work):
    tar = os.path.join(ROOT, "tests", "vectors", "irmin-stores.tar.zst")
    run("sh", "-c", f"zstd -dc '{tar}' | tar x -C '{work}'")
    stores = os.path.join(work, "irmin-stores")

    seeds = Seeds("irmin_control")
    for store in ("a-plain", "a-gc"):
        seeds.put(store, open(os.path.join(stores, store, "store.control"), "rb").read())

    dict_ = open(os.path.join(stores, "a-plain", "store.dict"), "rb").read()
    dict_start = whole_names(dict_, 4096)
    seeds = Seeds("irmin_dict")
    seeds.put("a-plain-start", dict_start)

    # The index's log: its header and its first 64 entries.
    seeds = Seeds("irmin_index")
    log = open(os.path.join(stores, "a-plain", "index", "log"), "rb").read()
    entries = 64 * 45
    seeds.put("a-plain-log-start", entries.to_bytes(8, "big") + log[8 : 32 + entries])

    # The start of the suffix (whole entries, up to the third commit) and
    # of the dictionary, as the target splits its input.
    suffix = open(os.path.join(stores, "a-plain", "store.0.suffix"), "rb").read()
    seeds = Seeds("irmin_suffix")
    start = suffix_start(suffix, 3)
    names = whole_names(dict_, 16384)  # the names those commits use
    seeds.put("a-plain-start", len(names).to_bytes(2, "little") + names + start)

    # irmin's own trace: its start, ended by a commit row.
    zst = os.path.join(ROOT, "tests", "vectors", "irmin-diff-a.repr.zst")
    trace = subprocess.run(["zstd", "-dc", zst], check=True, capture_output=True).stdout
    path = os.path.join(CORPUS, "trace", "irmin-diff-a-start")
    with open(path, "wb") as f:
        f.write(trace_start(trace, 16384))


def whole_names(data, limit):
    """The names of an irmin dictionary that fit in `limit` bytes."""
    pos = 0
    while pos < len(data):
        n = int.from_bytes(data[pos : pos + 4], "big")
        if pos + 4 + n > limit:
            break
        pos += 4 + n
    return data[:pos]


def suffix_start(data, commits):
    """The entries of an irmin suffix up to its `commits`-th commit."""
    pos = 0
    while commits:
        kind = data[pos + 32]
        length, body = read_leb(data, pos + 33)
        pos = body + length
        if kind == ord("D"):
            commits -= 1
    return data[:pos]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    pando = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as work:
        store_seeds(work, pando)
        irmin_seeds(work)


if __name__ == "__main__":
    main()
