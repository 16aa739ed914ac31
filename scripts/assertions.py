#!/usr/bin/env python3
"""assertions.py [--min N] [--list] [CRATE_SRC]: invariants asserted where they live.

Two checks on a crate's library code (pando-store's by default):

1. Density: `assert!`, `assert_eq!`, `assert_ne!` and their `debug_`
   forms per 1,000 lines of library code (lines that are neither blank
   nor comments, outside `#[cfg(test)]` modules; `shuttle_tests.rs` is a
   test module and `fuzzing.rs` the fuzz targets' harness, neither is
   counted) must reach `--min` (8 by default).
2. Each invariant a module's header states (the bullets after
   `Invariants:`, or the paragraph after `Invariant:`) names its check:
   `asserted in `NAME``/`asserted by `NAME`` (NAME, its last `::` part,
   occurs in the module's code, which holds an assertion), or, for a
   rule no code in the module can check as it runs, `tested by `NAME``
   (a test function of that name in the crate).

`--list` prints each file's count and lines. Exits 1 naming each file
and rule that fails.
"""

import pathlib
import re
import sys

ASSERT = re.compile(r"\b(?:debug_)?assert(?:_eq|_ne)?!")
NAMED = re.compile(r"\b(asserted (?:in|by)|tested by)\s+`([^`]+)`", re.IGNORECASE)
SKIPPED_FILES = {"shuttle_tests.rs", "fuzzing.rs"}


def library_lines(text):
    """The file's lines outside `#[cfg(test)] mod ... { }` blocks."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip().startswith("#[cfg(test)]") and re.match(r"\s*(pub(\(.*\))? )?mod \w+ \{\s*$", nxt):
            depth, i = 0, i + 1
            while i < len(lines):
                depth += lines[i].count("{") - lines[i].count("}")
                i += 1
                if depth <= 0:
                    break
            continue
        out.append(line)
        i += 1
    return out


def code_lines(lines):
    return [l for l in lines if l.strip() and not l.strip().startswith("//")]


def header(lines):
    """The `//!` lines at the top, without their markers."""
    out = []
    for line in lines:
        if line.startswith("//!"):
            out.append(line[3:].strip())
        elif line.strip() == "" and not out:
            continue
        else:
            break
    return out


def invariants(head):
    """The invariant rules a header states, each as one string."""
    rules, i = [], 0
    while i < len(head):
        line = head[i]
        if re.match(r"^Invariants?:", line):
            rest = re.sub(r"^Invariants?:\s*", "", line)
            i += 1
            if rest:
                # One paragraph: `Invariant: ...`.
                para = [rest]
                while i < len(head) and head[i] and not re.match(r"^[A-Z][a-z]+:", head[i]):
                    para.append(head[i])
                    i += 1
                rules.append(" ".join(para))
                continue
            current = None
            while i < len(head) and head[i]:
                if head[i].startswith("- "):
                    if current is not None:
                        rules.append(" ".join(current))
                    current = [head[i][2:]]
                elif current is not None:
                    current.append(head[i])
                else:
                    break
                i += 1
            if current is not None:
                rules.append(" ".join(current))
            continue
        i += 1
    return rules


def test_functions(crate):
    names = set()
    for p in list(crate.rglob("*.rs")):
        names.update(re.findall(r"\bfn (\w+)", p.read_text()))
    return names


def main():
    args = sys.argv[1:]
    minimum, listing = 8.0, False
    if "--min" in args:
        at = args.index("--min")
        minimum = float(args[at + 1])
        del args[at : at + 2]
    if "--list" in args:
        args.remove("--list")
        listing = True
    src = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent / "crates/pando-store/src")
    fns = test_functions(src.parent)
    failures, asserts, lines = [], 0, 0
    for path in sorted(src.rglob("*.rs")):
        text = path.read_text()
        lib = library_lines(text)
        code = code_lines(lib)
        count = sum(len(ASSERT.findall(l)) for l in code)
        if path.name not in SKIPPED_FILES:
            asserts += count
            lines += len(code)
        if listing:
            print(f"{count:4} {len(code):5} {path.relative_to(src)}")
        body = "\n".join(code)
        for rule in invariants(header(lib)):
            named = NAMED.findall(rule)
            where = f"{path.relative_to(src.parent.parent.parent)}"
            if not named:
                failures.append(f"{where}: invariant names no assertion or test: {rule[:90]}")
                continue
            for how, name in named:
                last = re.sub(r"[()!]", "", name.split("::")[-1]).strip()
                if how.lower().startswith("tested"):
                    if last not in fns:
                        failures.append(f"{where}: no test function `{last}` in the crate")
                elif count == 0:
                    failures.append(f"{where}: says `{name}` asserts, but the module holds no assertion")
                elif not re.search(r"\b" + re.escape(last) + r"\b", body):
                    failures.append(f"{where}: names `{name}`, not found in its code")
    density = 1000 * asserts / max(lines, 1)
    print(f"assertions: {asserts} in {lines} lines of library code, {density:.1f} per 1,000 (at least {minimum:g})")
    if density < minimum:
        failures.append(f"assertion density {density:.1f} per 1,000 lines is below {minimum:g}")
    for failure in failures:
        print(failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
