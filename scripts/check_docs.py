#!/usr/bin/env python3
"""check_docs.py PANDO: every link and every command in the documents works.

The documents: README.md, ARCHITECTURE.md, CONTRIBUTING.md, docs/*.md,
ocaml/README.md and bench/irmin/README.md. Checked in each, outside nothing (prose, tables and code
alike) unless said:
- every relative link `[text](target)` (prose only, not code) names an
  existing file, and a `#anchor` an existing heading of it, by GitHub's
  slug rules (lower case, punctuation dropped, spaces as hyphens, `-1`,
  `-2` for repeated headings);
- every `scripts/NAME` path names an existing file;
- every `pando SUBCOMMAND ...` in a code block or an inline code span (and
  `cargo run ... -p pando-cli -- SUBCOMMAND ...`) names a subcommand that
  `PANDO --help` lists, and every `-x`/`--flag` after it one that
  `PANDO SUBCOMMAND --help` lists. In a fenced block a line that starts with
  white space continues the command above it (the README's command table).

Everywhere in the repository (documents, code, scripts, tests, dune and
Cargo files, .ci/run): no reference to a place outside it, the directory
`shared` beside the checkout (or on the project's machines), or to the
notes that lived there (RELIABILITY, WORKLOAD, STYLE, ANCHORS, TEZOS-CONTEXT, each
`.md`): a clone has none of them. The one exception is the optional
irmin tarball, the third source of irmin 3.7.2, in the files that
resolve or describe it (ALLOWED_OUTSIDE). The scan checks itself first
on a file with bad references of its own making.

And README.md keeps to at most 300 lines; it and docs/MEASUREMENTS.md have
no paragraph, list item or table cell over 600 characters (outside code
blocks).

PANDO is the binary built from this checkout. Each problem is printed as
FILE:LINE: what; the exit status is 1 if there is any. Python's standard
library only.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCUMENTS = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "ocaml/README.md", "bench/irmin/README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))
)

LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SCRIPT = re.compile(r"(?<![\w./-])scripts/[A-Za-z0-9_./-]*[A-Za-z0-9_]")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# `pando SUB`, `target/release/pando SUB`, `pando-cli -- SUB`, where a
# command starts: at the start of the line or span, or after `$`, `&&`,
# `|`, `;` or `(` (not "the pando command" in a listing).
COMMAND = re.compile(r"(?:(?:^|[;&|($])\s*(?:[\w.~-]*/)*pando|\bpando-cli --)\s+(?=[a-z-])")
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)")
# Where a command ends on its line.
COMMAND_END = re.compile(r"&&|\|\||[|;`)]|\s#\s|\s{3,}(?=[a-z(])")


def slug(heading):
    """GitHub's anchor for a heading's text (github-slugger's rule)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    kept = "".join(c for c in text if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def anchors(path, cache={}):
    """The anchors of a markdown file's headings, repeats numbered."""
    if path not in cache:
        found, seen = set(), {}
        fence = None
        with open(path, encoding="utf-8") as f:
            for line in f:
                fence = fence_state(line, fence)
                if fence is not None or line.lstrip().startswith(("```", "~~~")):
                    continue
                m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    base = slug(m.group(1))
                    n = seen.get(base, 0)
                    seen[base] = n + 1
                    found.add(base if n == 0 else f"{base}-{n}")
                for a in re.finditer(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
                    found.add(a.group(1))
        cache[path] = found
    return cache[path]


def fence_state(line, fence):
    """The fence open after `line` (its marker), or None outside code."""
    m = re.match(r"\s*(```+|~~~+)", line)
    if not m:
        return fence
    if fence is None:
        return m.group(1)
    return None if m.group(1).startswith(fence) else fence


class Help:
    """What `pando ... --help` lists: subcommands and flags, asked once each."""

    def __init__(self, pando):
        self.pando = pando
        self.cache = {}

    def text(self, words):
        key = tuple(words)
        if key not in self.cache:
            out = subprocess.run([self.pando, *words, "--help"], capture_output=True, text=True)
            self.cache[key] = out.stdout if out.returncode == 0 else None
        return self.cache[key]

    def subcommands(self, words):
        text = self.text(words) or ""
        names, inside = set(), False
        for line in text.splitlines():
            if line.startswith("Commands:"):
                inside = True
            elif inside and re.match(r"  [a-z]", line):
                names.add(line.split()[0])
            elif inside and line and not line.startswith(" "):
                inside = False
        names.discard("help")
        return names

    def flags(self, words):
        text = self.text(words) or ""
        return set(re.findall(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)", text))


def check_command(command, help_, where, problems):
    """`command` is what follows `pando`: subcommands, then arguments."""
    tokens = command.split()
    words = []
    while tokens and re.fullmatch(r"[a-z][a-z-]*", tokens[0]) and help_.subcommands(words):
        if tokens[0] not in help_.subcommands(words):
            problems.append(f"{where}: `pando {' '.join(words + tokens[:1])}`: no such subcommand")
            return None
        words.append(tokens.pop(0))
    known = help_.flags(words)
    for flag in FLAG.findall(" ".join(tokens)):
        if flag not in known:
            problems.append(f"{where}: `pando {' '.join(words)}` has no {flag} (`pando {' '.join(words)} --help`)")
    return words


def commands_in(text):
    """Each `pando ...` command in a piece of code: the text after `pando`."""
    for m in COMMAND.finditer(text):
        rest = text[m.end():]
        end = COMMAND_END.search(rest)
        yield rest[: end.start()] if end else rest


def check_file(rel, help_, problems):
    path = os.path.join(ROOT, rel)
    fence = None
    last_command = None  # words of the command a continuation line extends
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for number, line in enumerate(lines, 1):
        where = f"{rel}:{number}"
        for m in SCRIPT.finditer(line):
            if not os.path.exists(os.path.join(ROOT, m.group(0))):
                problems.append(f"{where}: {m.group(0)} does not exist")
        was_in = fence is not None
        fence = fence_state(line, fence)
        if was_in and fence is not None:
            found = False
            for command in commands_in(line):
                found = True
                last_command = check_command(command, help_, where, problems)
            if not found and line[:1].isspace() and last_command is not None:
                for flag in FLAG.findall(COMMAND_END.split(line.strip())[0]):
                    if flag not in help_.flags(last_command):
                        problems.append(f"{where}: `pando {' '.join(last_command)}` has no {flag}")
            elif not found:
                last_command = None
            continue
        last_command = None
        if fence is not None or was_in:
            continue
        prose = CODE_SPAN.sub("", line)
        for span in CODE_SPAN.finditer(line):
            for command in commands_in(span.group(2)):
                check_command(command, help_, where, problems)
        for m in LINK.finditer(prose):
            check_link(m.group(2), rel, where, problems)


def check_link(target, rel, where, problems):
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
        return
    file_part, _, anchor = target.partition("#")
    if file_part:
        resolved = os.path.normpath(os.path.join(ROOT, os.path.dirname(rel), file_part))
        if not os.path.exists(resolved):
            problems.append(f"{where}: link to {target}: no such file")
            return
    else:
        resolved = os.path.join(ROOT, rel)
    if anchor:
        if not resolved.endswith(".md") or os.path.isdir(resolved):
            problems.append(f"{where}: link to {target}: an anchor into a file that is not markdown")
        elif anchor not in anchors(resolved):
            problems.append(f"{where}: link to {target}: no heading with that anchor")


# What a clone lacks. The names are split so that this file does not
# match itself.
OUTSIDE = re.compile(
    r"(?:\.\.|/work)/" + "shared\\b"
    + r"|\b(?:RELIABILITY|WORKLOAD|STYLE|ANCHORS|TEZOS-CONTEXT)\." + "md\\b"
)
TARBALL = "../" + "shared/irmin-bench/irmin-src.tar.gz"
# The files where the tarball may be named: those that resolve irmin's
# sources and the document that says how.
ALLOWED_OUTSIDE = {"bench/irmin/irmin-src.sh": TARBALL, "bench/irmin/README.md": TARBALL}
# The files scanned for such references, by name.
SCANNED_NAMES = re.compile(r"(?:^|/)(?:[^/]+\.(?:rs|ml|mli|sh|py|md|toml|opam)|dune|dune-project|\.ci/run)$")


def repository_files():
    """The files a clone would have: tracked, and new ones not ignored."""
    out = subprocess.run(
        ["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, text=True,
    )
    if out.returncode != 0:
        # Not a checkout git reads (an export, or git refusing the owner):
        # every file but build outputs and git's own.
        skip = {".git", "target", "_build", "node_modules"}
        found = []
        for top, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in skip]
            found += [os.path.relpath(os.path.join(top, n), ROOT) for n in names]
        return sorted(found)
    return sorted({f for f in out.stdout.split("\0") if f and os.path.isfile(os.path.join(ROOT, f))})


def check_outside(root, files, problems):
    """Each line of `files` (relative to `root`) that names a place outside
    the repository, as FILE:LINE: what."""
    for rel in files:
        if not SCANNED_NAMES.search(rel):
            continue
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except UnicodeDecodeError:
            continue
        allowed = ALLOWED_OUTSIDE.get(rel)
        for number, line in enumerate(lines, 1):
            if allowed:
                line = line.replace(allowed, "")
            for m in OUTSIDE.finditer(line):
                problems.append(f"{rel}:{number}: `{m.group(0)}` is outside the repository (a clone lacks it)")


def self_check():
    """check_outside on files made here: each bad reference found at its
    line, the allowed tarball passed over only where it is allowed."""
    import tempfile

    bad = "RELIABILITY" + ".md"
    with tempfile.TemporaryDirectory() as root:
        files = {
            "crates/x/src/lib.rs": f"//! fine\n//! the kill test ({bad}, test 1)\n",
            "ocaml/dune": "; fine\n; see ../" + "shared/irmin-bench/driver\n",
            "scripts/x.sh": f"# {TARBALL} is not allowed here\n",
            "bench/irmin/irmin-src.sh": f"tarball=$root/{TARBALL}\n",
            "notes.txt": f"{bad} in a file that is not scanned\n",
        }
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)) or root, exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        found = []
        check_outside(root, sorted(files), found)
    where = sorted(p.split(": ")[0] for p in found)
    expected = ["crates/x/src/lib.rs:2", "ocaml/dune:2", "scripts/x.sh:1"]
    if where != expected:
        sys.exit(f"check_docs.py's own check of outside references is broken: found {where}, expected {expected}")


README_LINES = 300
PARAGRAPH = 600
# The documents held to PARAGRAPH (README.md is also held to README_LINES);
# the others do not keep to it yet.
SIZED = ["README.md", "docs/MEASUREMENTS.md"]


def check_size(rel, problems, max_lines=None):
    """A document's paragraphs', list items' and table cells' length, and
    its number of lines if `max_lines` is given. Code blocks are exempt."""
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        lines = f.read().splitlines()
    if max_lines is not None and len(lines) > max_lines:
        problems.append(f"{rel}: {len(lines)} lines, more than {max_lines}")
    fence, block, start = None, [], 0

    def flush():
        text = " ".join(line.strip() for line in block)
        if len(text) > PARAGRAPH:
            problems.append(f"{rel}:{start}: a paragraph of {len(text)} characters, more than {PARAGRAPH}")
        block.clear()

    for number, line in enumerate(lines, 1):
        was_in = fence is not None
        fence = fence_state(line, fence)
        if was_in or fence is not None:
            flush()
            continue
        if line.startswith("|"):
            flush()
            for cell in line.strip().strip("|").split("|"):
                if len(cell.strip()) > PARAGRAPH:
                    problems.append(f"{rel}:{number}: a table cell of {len(cell.strip())} characters")
            continue
        if not line.strip() or line.startswith("#") or re.match(r"\s*([-*]|\d+\.)\s", line):
            flush()
            if not line.strip() or line.startswith("#"):
                continue
        if not block:
            start = number
        block.append(line)
    flush()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    help_ = Help(sys.argv[1])
    if not help_.subcommands([]):
        sys.exit(f"{sys.argv[1]} --help lists no subcommands")
    problems = []
    for rel in DOCUMENTS:
        if os.path.exists(os.path.join(ROOT, rel)):
            check_file(rel, help_, problems)
        else:
            problems.append(f"{rel}: missing")
    for rel in SIZED:
        check_size(rel, problems, README_LINES if rel == "README.md" else None)
    self_check()
    files = repository_files()
    check_outside(ROOT, files, problems)
    for p in problems:
        print(p)
    print(f"docs: {len(DOCUMENTS)} documents, {len(files)} files scanned, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
