#!/usr/bin/env bash
# The OCaml binding's checks: the Rust crate's lints, then the dune
# project's build and tests (ocaml/), with the OCaml on PATH or with the
# OCaml 5 installed at PREFIX (scripts/ocaml5.sh makes one); with the
# OCaml on PATH, then the library installed and used from a project
# outside the repository (scripts/ocaml-install-test.sh).
#
#   scripts/ocaml-test.sh [--ocaml5 PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
if [ "${1:-}" = --ocaml5 ]; then
  prefix=${2:?--ocaml5 needs the prefix of an OCaml 5 installation}
  # dune takes the compiler from PATH and its libraries from OCAMLPATH
  # (Debian's are compiled by 4.13); cargo's ocaml-sys reads OCAMLOPT.
  export PATH="$prefix/bin:$PATH"
  export OCAMLPATH="$prefix/lib/ocaml"
  export OCAMLOPT="$prefix/bin/ocamlopt"
  build="$root/target/ocaml5-dune"
  # Only the compiler's own libraries exist for OCaml 5 here (no Lwt): the
  # binding, its tests, its benchmark and the example, not Pando_context
  # (so not the package's @install) nor the duo.
  targets=(@pando/all @test/runtest @bench/all @example/all)
  install_test=0
else
  build="$root/target/ocaml-dune"
  targets=(@install @runtest @bench/all @example/all)
  install_test=1
fi
echo "OCaml $(ocamlopt -version) ($(command -v ocamlopt))"

manifest=crates/pando-ocaml/Cargo.toml
cargo fmt --manifest-path "$manifest" -- --check
CARGO_TARGET_DIR="$root/target" cargo clippy --quiet --locked --manifest-path "$manifest" -- -D warnings

# dune's build directory outside the source tree, one per compiler.
export PANDO_ROOT="$root"
cd ocaml
dune build --build-dir "$build" "${targets[@]}" 2>&1
if [ $install_test = 1 ]; then
  "$root/scripts/ocaml-install-test.sh" "$build"
fi
echo "ocaml tests: passed (OCaml $(ocamlopt -version))"
