#!/usr/bin/env bash
# The OCaml library installed as ocaml/README.md says, and used from a dune
# project outside this repository. scripts/ocaml-test.sh runs it after
# building @install in dune's build directory BUILD (default
# target/ocaml-dune); it fails if any step does:
# - `dune install --prefix` from BUILD into a temporary prefix;
# - a dune project in a temporary folder, with ocaml/example/main.ml under
#   `(libraries pando)` and a program under `(libraries pando.context)`,
#   built with OCAMLPATH naming only that prefix for pando;
# - the outside example, run on a new store, prints the same Co... hash as
#   the one built in this repository (BUILD/default/example/main.exe) on
#   another, and both, without their argument, print one line of usage and
#   exit 2; the Pando_context program commits and reads back;
# - README.md shows ocaml/example/main.ml as it is, from `let () =` on.
#
#   scripts/ocaml-install-test.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-$root/target/ocaml-dune}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pando-ocaml-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "ocaml-install-test: $*" >&2; exit 1; }

readme=$(awk '/^\(\* ocaml\/example\/main\.ml/ { shown = 1; next } shown && /^```/ { exit } shown' README.md)
[ -n "$readme" ] && [ "$readme" = "$(sed -n '/^let () =/,$p' ocaml/example/main.ml)" ] ||
  fail "README.md's OCaml example is not ocaml/example/main.ml from 'let () =' on"

(cd ocaml && dune install --build-dir "$build" --prefix "$tmp/prefix" 2>&1) >"$tmp/install.log" ||
  { cat "$tmp/install.log" >&2; fail "dune install into $tmp/prefix failed"; }

project=$tmp/project
mkdir -p "$project"
cp ocaml/example/main.ml "$project/"
cat >"$project/context_main.ml" <<'EOD'
(* Pando_context from the installed pando.context: commit, read back. *)
let () =
  Lwt_main.run
    (let open Lwt.Syntax in
     let* index = Pando_context.init Sys.argv.(1) in
     let* ctx = Pando_context.add (Pando_context.empty index) [ "a" ] (Bytes.of_string "1") in
     let* commit = Pando_context.commit ~time:0L ctx in
     let* ctx = Pando_context.checkout_exn index commit in
     let* v = Pando_context.find ctx [ "a" ] in
     assert (v = Some (Bytes.of_string "1"));
     print_endline (Pando.Hash.to_b58check commit);
     Pando_context.close index)
EOD
printf '(lang dune 2.9)\n' >"$project/dune-project"
cat >"$project/dune" <<'EOD'
(executable
 (name main)
 (modules main)
 (libraries pando))

(executable
 (name context_main)
 (modules context_main)
 (libraries pando.context lwt lwt.unix))
EOD
# pando from the prefix only (OCAMLPATH comes before findlib's own path).
OCAMLPATH="$tmp/prefix/lib${OCAMLPATH:+:$OCAMLPATH}" \
  dune build --root "$project" ./main.exe ./context_main.exe 2>&1 ||
  fail "the project using (libraries pando) from $tmp/prefix does not build"

outside=$project/_build/default/main.exe
inside=$build/default/example/main.exe
for exe in "$outside" "$inside"; do
  status=0
  "$exe" >"$tmp/out" 2>"$tmp/err" || status=$?
  [ "$status" = 2 ] || fail "$exe without an argument exits $status, not 2"
  [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q '^usage: main.exe DIR' "$tmp/err" ||
    fail "$exe without an argument does not print one line of usage: $(cat "$tmp/out" "$tmp/err")"
done
hash_outside=$("$outside" "$tmp/store-outside") || fail "the outside example failed on a new store"
hash_inside=$("$inside" "$tmp/store-inside") || fail "the repository's example failed on a new store"
[[ $hash_outside =~ ^Co[1-9A-HJ-NP-Za-km-z]{50}$ ]] ||
  fail "the outside example printed '$hash_outside', not a commit hash"
[ "$hash_outside" = "$hash_inside" ] ||
  fail "the outside example printed $hash_outside, the repository's $hash_inside"
hash_context=$("$project/_build/default/context_main.exe" "$tmp/store-context") ||
  fail "the outside Pando_context program failed on a new store"
[[ $hash_context =~ ^Co[1-9A-HJ-NP-Za-km-z]{50}$ ]] ||
  fail "the outside Pando_context program printed '$hash_context', not a commit hash"
echo "ocaml install: pando and pando.context installed and used outside the repository ($hash_outside)"
