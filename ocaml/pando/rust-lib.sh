#!/bin/sh
# Builds crates/pando-ocaml with cargo and copies its archives into the
# current directory (dune's build directory of ocaml/pando).
#   PANDO_ROOT            the repository (default: found above this directory)
#   PANDO_OCAML_PROFILE   cargo profile (default: release)
#   CARGO_TARGET_DIR      as cargo reads it (default: PANDO_ROOT/target)
set -eu
root=${PANDO_ROOT:-}
if [ -z "$root" ]; then
  dir=$(pwd -P)
  while [ "$dir" != / ]; do
    if [ -f "$dir/crates/pando-ocaml/Cargo.toml" ]; then root=$dir; break; fi
    dir=$(dirname "$dir")
  done
fi
if [ -z "$root" ]; then
  echo "rust-lib.sh: cannot find the pando repository above $(pwd); set PANDO_ROOT" >&2
  exit 1
fi
profile=${PANDO_OCAML_PROFILE:-release}
target=${CARGO_TARGET_DIR:-$root/target}
CARGO_TARGET_DIR=$target cargo build --quiet --locked --profile "$profile" --manifest-path "$root/crates/pando-ocaml/Cargo.toml"
case $profile in dev) out=debug ;; *) out=$profile ;; esac
cp "$target/$out/libpando_ocaml.a" libpando_ocaml.a
cp "$target/$out/libpando_ocaml.so" dllpando_ocaml.so
