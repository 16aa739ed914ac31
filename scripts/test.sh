#!/usr/bin/env bash
# The test command: every test of the workspace, then the pack's hand-over
# under Shuttle's schedules, and a total at the end. CI runs exactly this.
#
# Everything it needs is in the repository (the test vectors are
# tests/vectors/). A step that needs an optional tool (OCaml, irmin's
# sources) and does not find it is skipped, not failed: it calls `skip`,
# and the last line names it after the counts. The optional steps:
# - the OCaml binding's tests (scripts/ocaml-test.sh), when ocaml/ exists
#   and ocamlfind and dune are installed (scripts/ocaml-deps.sh);
# - the check of the documents' links and commands (scripts/check_docs.py)
#   and of the invariants' assertions (scripts/assertions.py), when
#   python3 is installed;
# - the duo, pando against irmin 3.7.2 operation by operation
#   (scripts/duo.sh) on the tiny trace, irmin-diff-a and the edge-case
#   traces irmin-edge and irmin-edge-raw, when bench/irmin/irmin-src.sh
#   finds irmin 3.7.2 (bench/irmin/README.md).
set -uo pipefail
cd "$(dirname "$0")/.."

skipped=()
# skip NAME WHY: a step not run for want of an optional tool; the last
# line names it with its reason.
skip() {
  echo "skipped $1: $2" >&2
  skipped+=("$1 ($2)")
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Tests never write into the checkout (a property test once saved its
# failing seed into a tracked file): what git sees must not change.
checkout() { git status --porcelain 2>/dev/null; git diff 2>/dev/null | cksum; }
checkout_before=$(checkout)
# The other cargo workspaces (bench/, fuzz/, the binding's crate) build
# with --locked in CI: a dependency added to a shared crate must reach
# their lock files too, or CI fails late (it did once, on bench/).
for ws in bench fuzz crates/pando-ocaml; do
  if [ -f "$ws/Cargo.lock" ] && ! (cd "$ws" && cargo metadata --locked --format-version 1 >/dev/null); then
    echo "error: $ws/Cargo.lock is out of date: run \`cargo update --workspace\` in $ws" >&2
    exit 1
  fi
done
cargo test --workspace --locked "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
  # The pack's hand-over between readers, the writer and a collection's
  # switches under Shuttle's random schedules (its locks swapped in by a feature).
  cargo test -p pando-store --features shuttle --locked --lib shuttle 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
fi
# Every link and every `pando` command in the documents works
# (scripts/check_docs.py, against the binary the tests just built), and
# every invariant names its assertion (scripts/assertions.py).
if [ "$status" -eq 0 ]; then
  if command -v python3 >/dev/null 2>&1; then
    cargo build --locked -q -p pando-cli \
      && python3 scripts/check_docs.py "${CARGO_TARGET_DIR:-target}/debug/pando" 2>&1 | tee -a "$log" \
      && python3 scripts/assertions.py 2>&1 | tee -a "$log"
    status=$?  # pipefail: the build's, the check's or the assertions' failure
  else
    skip "documents' links and commands" "no python3"
  fi
fi
# The OCaml binding's own tests (with the OCaml on PATH: Debian's 4.13).
ocaml=0
if command -v ocamlfind >/dev/null 2>&1 && command -v dune >/dev/null 2>&1; then
  ocaml=1
fi
if [ "$status" -eq 0 ] && [ -d ocaml ]; then
  if [ "$ocaml" -eq 1 ]; then
    scripts/ocaml-test.sh 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
  else
    skip "OCaml binding tests" "no dune or ocamlfind"
    echo "(scripts/ocaml-deps.sh installs Debian's OCaml)" >&2
  fi
fi
# The duo: every result of pando (through the binding) against irmin 3.7.2
# on two small traces and the edge cases; each run's last line is `duo: B
# blocks, O results compared, D divergences`. First its trace decoder against irmin's, row
# by row, on both.
if [ "$status" -eq 0 ] && [ -d ocaml ]; then
  # irmin found no way is a skip; an IRMIN_SRC that names no irmin is an
  # error (the lookup says why).
  if [ -z "${IRMIN_SRC:-}" ] && ! (. bench/irmin/irmin-src.sh && irmin_src "$PWD" 2>/dev/null); then
    skip "duo against irmin" "irmin 3.7.2 not found (bench/irmin/README.md)"
  elif [ -n "${IRMIN_SRC:-}" ] && ! (. bench/irmin/irmin-src.sh && irmin_src "$PWD"); then
    status=1
  elif [ "$ocaml" -eq 0 ]; then
    skip "duo against irmin" "no dune or ocamlfind"
  else
    traces=$(mktemp -d)
    # The edge cases irmin answered (tests/vectors/README.md): no
    # divergence, and no store unlike the trace's recorded answers.
    edge() {
      scripts/duo.sh "$@" 2>&1 | tee -a "$log" | tee "$traces/edge.out"
      [ "${PIPESTATUS[0]}" -eq 0 ] && grep -q ', trace mismatches 0$' "$traces/edge.out" \
        || { echo "error: the duo on $1: divergences or trace mismatches" >&2; return 1; }
    }
    # The debug build the tests made: a tiny trace takes it 3 s, and no
    # release build is needed for it.
    cargo build --locked -q -p pando-cli \
      && "${CARGO_TARGET_DIR:-target}/debug/pando" gen --preset tiny -o "$traces/tiny.repr" \
      && zstd -q -d tests/vectors/irmin-diff-a.repr.zst -o "$traces/irmin-diff-a.repr" \
      && zstd -q -d tests/vectors/irmin-edge.repr.zst -o "$traces/irmin-edge.repr" \
      && zstd -q -d tests/vectors/irmin-edge-raw.repr.zst -o "$traces/irmin-edge-raw.repr" \
      && duo=$(scripts/duo.sh --build-only | tail -1) \
      && "$duo" --check-reader "$traces/irmin-diff-a.repr" 2>&1 | tee -a "$log" \
      && "$duo" --check-reader "$traces/tiny.repr" 2>&1 | tee -a "$log" \
      && "$duo" --check-reader "$traces/irmin-edge.repr" 2>&1 | tee -a "$log" \
      && scripts/duo.sh "$traces/tiny.repr" 2>&1 | tee -a "$log" \
      && scripts/duo.sh "$traces/irmin-diff-a.repr" 2>&1 | tee -a "$log" \
      && edge "$traces/irmin-edge.repr" --trace-under-data \
      && edge "$traces/irmin-edge-raw.repr" --api raw \
      && edge "$traces/irmin-edge-raw.repr"
    status=$?
    rm -rf "$traces"
  fi
fi
if [ "$(checkout)" != "$checkout_before" ]; then
  echo "error: the tests changed the checkout:" >&2
  git status --short >&2
  status=1
fi
# cargo's last line is the doc-test summary (often 0 tests): sum them all.
passed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^passed/) sum += $(i - 1) } END { print sum + 0 }' "$log")
failed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^failed/) sum += $(i - 1) } END { print sum + 0 }' "$log")
skip_note=""
if [ "${#skipped[@]}" -gt 0 ]; then
  skip_note=" (skipped: $(printf '%s, ' "${skipped[@]}" | sed 's/, $//'))"
fi
echo
if [ "$status" -eq 0 ]; then
  echo "tests: $passed passed, $failed failed$skip_note"
else
  echo "tests: FAILED ($passed passed, $failed failed before stopping; see above)$skip_note"
fi
exit "$status"
