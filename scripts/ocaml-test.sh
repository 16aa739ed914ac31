#!/usr/bin/env bash
# The OCaml binding's checks: the Rust crate's lints, then the dune
# project's build and tests (ocaml/), with the OCaml on PATH or with the
# OCaml 5 installed at PREFIX (scripts/ocaml5.sh makes one).
#
#   scripts/ocaml-test.sh [--ocaml5 PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
if [ "${1:-}" = --ocaml5 ]; then
  prefix=${2:?--ocaml5 needs the prefix of an OCaml 5 installation}
  export PATH="$prefix/bin:$PATH"
  export OCAMLFIND_CONF="${OCAMLFIND_CONF:-$prefix/lib/findlib.conf}"
  export OCAMLOPT="$prefix/bin/ocamlopt"
  build="$root/target/ocaml5-dune"
else
  build="$root/target/ocaml-dune"
fi
echo "OCaml $(ocamlopt -version) ($(command -v ocamlopt))"

manifest=crates/pando-ocaml/Cargo.toml
cargo fmt --manifest-path "$manifest" -- --check
CARGO_TARGET_DIR="$root/target" cargo clippy --quiet --locked --manifest-path "$manifest" -- -D warnings

# dune's build directory outside the source tree, one per compiler.
export PANDO_ROOT="$root"
cd ocaml
dune build --build-dir "$build" @install @runtest 2>&1
echo "ocaml tests: passed (OCaml $(ocamlopt -version))"
